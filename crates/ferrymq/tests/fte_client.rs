//! Agents in client mode: two agents on another "host" (their own `$FERRYMQ_HOME`) reach an HA
//! group of three instances through agentQMgrHost and the agentQMgrStandby list; the active
//! instance is killed (SIGKILL) in the middle of a file, the agents find the new active instance
//! by themselves and the transfer resumes from its checkpoint and arrives whole. And an agent
//! whose queue manager requires a password connects with the entry of its credentials file
//! (MQMFTCredentials.xml), is refused with the reason without it, and will not use a credentials
//! file that other users may read.

mod fte_support;
mod support;

use std::time::Duration;

use fte_support::{
    agents_with, data, dir, part_of, resumes_and_resent, wait_result, wait_until, Agents,
};
use support::ha::HaGroup;
use support::{mqsc, Home, Qm};

const CHUNK: usize = 64 * 1024;
const SIZE: usize = 24 * 1024 * 1024 + 4_321;
const INTERVAL: usize = 3;
/// Sent again at most per resume: what the receiver had beyond its last checkpoint
/// (agentFrameSize 2 × agentCheckpointInterval chunks) and the window in flight (2 × 2 chunks).
const RESENT_MAX_BYTES: u64 = ((2 * INTERVAL + 2 * 2) * CHUNK) as u64;

/// fteCreateAgent in client mode on 127.0.0.1(`port`) for each of `names`, with `extra` flags,
/// then fteStartAgent.
fn client_agents<'h>(
    home: &'h Home,
    qm: &str,
    port: u16,
    extra: &[&str],
    names: &[&str],
) -> Agents<'h> {
    let port = port.to_string();
    let mut flags = vec!["-agentQMgrHost", "127.0.0.1", "-agentQMgrPort", &port];
    flags.extend_from_slice(extra);
    agents_with(home, qm, names, CHUNK, INTERVAL, &flags)
}

#[test]
fn client_agents_follow_an_ha_group_through_their_standby_list_and_resume_after_a_failover() {
    let g = HaGroup::start("FTHA", &[]);
    let first = g.wait_active(Duration::from_secs(30));
    // agentQMgrHost names the active instance; the standby list names the other two.
    let others: Vec<String> = (0..3)
        .filter(|i| *i != first)
        .map(|i| format!("127.0.0.1({})", g.ports[i]))
        .collect();
    let standby = others.join(",");
    let host = Home::new();
    let _a = client_agents(
        &host,
        "FTHA",
        g.ports[first],
        &["-agentQMgrStandby", &standby],
        &["SRC", "DST"],
    );
    let props =
        std::fs::read_to_string(host.path().join("mqft/agents/SRC/agent.properties")).unwrap();
    assert!(
        props.contains(&format!("agentQMgrStandby={standby}")),
        "{props}"
    );

    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("big.bin");
    let body = data(SIZE, 7);
    std::fs::write(&src, &body).unwrap();
    let dst = dir(work.path(), "in").join("big.bin");
    host.ok(&[
        "fteCreateTransfer",
        "-sa",
        "SRC",
        "-sm",
        "FTHA",
        "-da",
        "DST",
        "-dm",
        "FTHA",
        "-df",
        dst.to_str().unwrap(),
        src.to_str().unwrap(),
    ]);
    let part = part_of(&dst);
    wait_until("a quarter of the file at the destination", 60, || {
        std::fs::metadata(&part).is_ok_and(|m| m.len() >= SIZE as u64 / 4)
    });
    assert!(!dst.exists(), "the transfer ended before the failover");
    g.kill9(first);
    let t = std::time::Instant::now();
    let next = g.wait_active(Duration::from_secs(30));
    eprintln!("failover: instance {first} to {next} in {:?}", t.elapsed());
    assert_ne!(next, first);

    let result = wait_result(
        &host,
        "SRC",
        "the transfer's result in the sending agent's log",
        150,
    );
    eprintln!("result: {result}");
    assert!(result.contains("transfer complete"), "{result}");
    assert!(
        std::fs::read(&dst).unwrap() == body,
        "the destination differs from the source"
    );
    assert!(!part.exists());
    let names: Vec<_> = std::fs::read_dir(dst.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    let (resumes, resent) = resumes_and_resent(&result);
    assert!(resumes >= 1, "{result}");
    assert!(resent <= resumes * RESENT_MAX_BYTES, "{result}");
    // Both agents came back on the new active instance by themselves.
    for a in ["SRC", "DST"] {
        let log = fte_support::agent_log(&host, a);
        assert!(log.contains("reconnecting"), "{a}: {log}");
    }
}

const PASSWORD: &str = "Fte-Agent-Pa55";

fn credentials(path: &std::path::Path, qm: &str, password: &str, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(
        path,
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
             <tns:mqmftCredentials xmlns:tns=\"http://wmqfte.ibm.com/MQMFTCredentials\">\n\
             <tns:qmgr name=\"{qm}\" mqUserId=\"fteuser\" mqPassword=\"{password}\"/>\n\
             </tns:mqmftCredentials>\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_client_agent_connects_with_its_credentials_file_and_not_without_a_safe_one() {
    let home = Home::new();
    // fteCreateAgent defines the agent's queues over its own (client) connection.
    let qm = Qm::start_remote_admin(&home, "FTCRED", &[]);
    mqsc(
        &home,
        "FTCRED",
        "DEFINE AUTHINFO(FTE.IDPW) AUTHTYPE(IDPWOS) CHCKCLNT(REQUIRED) FAILDLAY(0)\n\
         ALTER QMGR CONNAUTH(FTE.IDPW)\n\
         REFRESH SECURITY TYPE(CONNAUTH)\n",
    );
    let out = home.run_with_input(
        &[
            "setmqusr",
            "-m",
            "FTCRED",
            "-u",
            "fteuser",
            "-g",
            "mqm",
            "--password-stdin",
        ],
        &format!("{PASSWORD}\n"),
    );
    assert!(out.status.success(), "{out:?}");
    let host = Home::new();
    let port = qm.port.to_string();
    let work = tempfile::tempdir().unwrap();
    let creds = work.path().join("MQMFTCredentials.xml");
    let create = |agent: &str, extra: &[&str]| {
        let mut args = vec![
            "fteCreateAgent",
            "-agentName",
            agent,
            "-agentQMgr",
            "FTCRED",
            "-agentQMgrHost",
            "127.0.0.1",
            "-agentQMgrPort",
            &port,
        ];
        args.extend_from_slice(extra);
        host.run(&args)
    };

    // No credentials: refused, and the reason says where they would come from.
    let o = create("NOCRED", &[]);
    let t = fte_support::text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(
        t.contains("2035") && t.contains("agentQMgrAuthenticationCredentialsFile"),
        "{t}"
    );
    // A credentials file others may read: refused before it is used.
    credentials(&creds, "FTCRED", PASSWORD, 0o644);
    let o = create("OPEN", &["-credentialsFile", creds.to_str().unwrap()]);
    let t = fte_support::text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains("chmod 600"), "{t}");
    // A wrong password: refused.
    credentials(&creds, "FTCRED", "wrong-password", 0o600);
    let o = create("WRONG", &["-credentialsFile", creds.to_str().unwrap()]);
    assert!(!o.status.success(), "{}", fte_support::text(&o));

    // The right entry: both agents are made and started, and a file crosses.
    credentials(&creds, "FTCRED", PASSWORD, 0o600);
    let _a = client_agents(
        &host,
        "FTCRED",
        qm.port,
        &["-credentialsFile", creds.to_str().unwrap()],
        &["CSRC", "CDST"],
    );
    let src = work.path().join("small.bin");
    let body = data(3 * CHUNK + 17, 9);
    std::fs::write(&src, &body).unwrap();
    let dst = dir(work.path(), "in").join("small.bin");
    let out = host.ok(&[
        "fteCreateTransfer",
        "-w",
        "60",
        "-sa",
        "CSRC",
        "-sm",
        "FTCRED",
        "-da",
        "CDST",
        "-dm",
        "FTCRED",
        "-df",
        dst.to_str().unwrap(),
        src.to_str().unwrap(),
    ]);
    assert!(out.contains("complete"), "{out}");
    assert!(std::fs::read(&dst).unwrap() == body);
}

#[test]
fn a_client_agent_speaks_tls_with_its_trust_store_and_key_store() {
    let home = Home::new();
    let qm = Qm::create(&home, "FTTLS", &[]);
    qm.set_ini("Channels", "RemoteAdmin", "yes");
    let certs = home.path().join("certs");
    home.ok(&[
        "mkdevcerts",
        "--dir",
        certs.to_str().unwrap(),
        "-m",
        "FTTLS",
        "--client",
        "agent",
    ]);
    qm.restart();
    // agentSslKeyStore: the agent's certificate and key in one PEM file.
    let store = certs.join("agent-store.pem");
    let pem = [
        std::fs::read_to_string(certs.join("agent.pem")).unwrap(),
        std::fs::read_to_string(certs.join("agent.key")).unwrap(),
    ]
    .concat();
    std::fs::write(&store, pem).unwrap();

    // The agents' queues are made while the channel still takes plain connections.
    let host = Home::new();
    let port = qm.port.to_string();
    for a in ["TSRC", "TDST", "PLAIN"] {
        host.ok(&[
            "fteCreateAgent",
            "-agentName",
            a,
            "-agentQMgr",
            "FTTLS",
            "-agentQMgrHost",
            "127.0.0.1",
            "-agentQMgrPort",
            &port,
        ]);
    }
    for a in ["TSRC", "TDST"] {
        let f = host
            .path()
            .join("mqft/agents")
            .join(a)
            .join("agent.properties");
        let mut text = std::fs::read_to_string(&f).unwrap();
        text.push_str(&format!(
            "agentSslCipherSpec=ANY_TLS12_OR_HIGHER\nagentSslTrustStore={}\nagentSslKeyStore={}\n",
            certs.join("ca.pem").display(),
            store.display()
        ));
        std::fs::write(&f, text).unwrap();
    }
    mqsc(
        &home,
        "FTTLS",
        "ALTER CHANNEL(SYSTEM.DEF.SVRCONN) CHLTYPE(SVRCONN) SSLCIPH(ANY_TLS12_OR_HIGHER) SSLCAUTH(REQUIRED)\n",
    );
    let _a = Agents {
        home: &host,
        names: vec!["TSRC".into(), "TDST".into(), "PLAIN".into()],
    };
    // Without TLS the agent is refused, and says why.
    let o = host.run(&["fteStartAgent", "PLAIN"]);
    let t = fte_support::text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(
        t.contains("SSLCIPH") && t.contains("agentSslCipherSpec"),
        "{t}"
    );
    for a in ["TSRC", "TDST"] {
        let out = host.ok(&["fteStartAgent", a]);
        assert!(out.contains("started"), "{out}");
    }
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("tls.bin");
    let body = data(2 * 256 * 1024 + 99, 5);
    std::fs::write(&src, &body).unwrap();
    let dst = dir(work.path(), "in").join("tls.bin");
    let out = host.ok(&[
        "fteCreateTransfer",
        "-w",
        "60",
        "-sa",
        "TSRC",
        "-sm",
        "FTTLS",
        "-da",
        "TDST",
        "-dm",
        "FTTLS",
        "-df",
        dst.to_str().unwrap(),
        src.to_str().unwrap(),
    ]);
    assert!(out.contains("complete"), "{out}");
    assert!(std::fs::read(&dst).unwrap() == body);
}
