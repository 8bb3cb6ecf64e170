//! An agent's configuration: `agent.properties` under `<home>/mqft/agents/<AGENT>/`, with MQ's
//! property names (agentQMgr, agentChunkSize, agentWindowSize, ...), one `name=value` a line.

use std::path::{Path, PathBuf};

use ferrymq_types::limits::{FTE_CHUNK_SIZE_MAX_BYTES, FTE_OUTSTANDING_CHUNKS_MAX};

use crate::{err, Result};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentProps {
    pub agent_name: String,
    pub agent_qmgr: String,
    /// Client mode when set: host, port and channel of the agent's queue manager.
    pub agent_qmgr_host: Option<String>,
    pub agent_qmgr_port: u16,
    pub agent_qmgr_channel: String,
    /// `agentQMgrStandby`: in client mode, the other instances of the agent's queue manager
    /// (`host(port)`, comma-separated: MQ names one standby, an HA group has two), tried after
    /// agentQMgrHost in turn at every connect and reconnect.
    pub agent_qmgr_standby: String,
    /// `agentQMgrAuthenticationCredentialsFile`: the MQMFTCredentials.xml whose entry for the
    /// agent's queue manager gives the user id and password it connects with (empty: none).
    pub credentials_file: String,
    /// `agentSslCipherSpec`: in client mode, TLS with this CipherSpec (an SSLCIPH value such as
    /// `ANY_TLS12_OR_HIGHER`); empty: no TLS.
    pub ssl_cipher_spec: String,
    /// `agentSslTrustStore`: the CA certificates (PEM) the queue manager's certificate must
    /// chain to; needed with agentSslCipherSpec.
    pub ssl_trust_store: String,
    /// `agentSslKeyStore`: the agent's own certificate chain and private key, in one PEM file,
    /// for channels that ask for a client certificate (empty: none).
    pub ssl_key_store: String,
    pub coordination_qmgr: String,
    pub agent_chunk_size: usize,
    pub agent_window_size: usize,
    pub agent_frame_size: usize,
    pub agent_checkpoint_interval: usize,
    pub max_source_transfers: usize,
    pub max_destination_transfers: usize,
    /// How long (seconds) a transfer keeps trying to resume before it fails; -1: for ever.
    pub transfer_recovery_timeout: i64,
    /// `sandboxRoot`: where the agent may read and write (empty: anywhere but FerryMQ's data).
    pub sandbox_root: String,
    /// `directWrites` (FerryMQ's own): the receiver writes a chunk's whole blocks to the `.part`
    /// with direct I/O (O_DIRECT) where the file system allows it, sparing the page-cache copy
    /// at the price of waiting for the disk at each write. Off by default: through the page
    /// cache the kernel writes back in large, overlapping requests, and each checkpoint syncs
    /// the file either way.
    pub direct_writes: bool,
    /// The sandbox in force: set by [`load`], which knows the home; none for bare properties.
    pub sandbox: crate::sandbox::Sandbox,
}

impl AgentProps {
    pub fn new(agent: &str, qmgr: &str) -> AgentProps {
        AgentProps {
            agent_name: agent.to_string(),
            agent_qmgr: qmgr.to_string(),
            agent_qmgr_host: None,
            agent_qmgr_port: 1414,
            agent_qmgr_channel: "SYSTEM.DEF.SVRCONN".into(),
            agent_qmgr_standby: String::new(),
            credentials_file: String::new(),
            ssl_cipher_spec: String::new(),
            ssl_trust_store: String::new(),
            ssl_key_store: String::new(),
            coordination_qmgr: qmgr.to_string(),
            agent_chunk_size: 256 * 1024,
            agent_window_size: 10,
            agent_frame_size: 5,
            agent_checkpoint_interval: 1,
            max_source_transfers: 25,
            max_destination_transfers: 25,
            transfer_recovery_timeout: -1,
            sandbox_root: String::new(),
            direct_writes: false,
            sandbox: Default::default(),
        }
    }

    /// The chunks a sender keeps unacknowledged at most: window × frame, bounded.
    pub fn outstanding_chunks_max(&self) -> usize {
        (self.agent_window_size * self.agent_frame_size).clamp(1, FTE_OUTSTANDING_CHUNKS_MAX)
    }

    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let mut kv = |k: &str, v: String| s.push_str(&format!("{k}={v}\n"));
        kv("agentName", self.agent_name.clone());
        kv("agentQMgr", self.agent_qmgr.clone());
        if let Some(h) = &self.agent_qmgr_host {
            kv("agentQMgrHost", h.clone());
            kv("agentQMgrPort", self.agent_qmgr_port.to_string());
            kv("agentQMgrChannel", self.agent_qmgr_channel.clone());
            if !self.agent_qmgr_standby.is_empty() {
                kv("agentQMgrStandby", self.agent_qmgr_standby.clone());
            }
            for (k, v) in [
                ("agentSslCipherSpec", &self.ssl_cipher_spec),
                ("agentSslTrustStore", &self.ssl_trust_store),
                ("agentSslKeyStore", &self.ssl_key_store),
            ] {
                if !v.is_empty() {
                    kv(k, v.clone());
                }
            }
        }
        if !self.credentials_file.is_empty() {
            kv(
                "agentQMgrAuthenticationCredentialsFile",
                self.credentials_file.clone(),
            );
        }
        kv("coordinationQMgr", self.coordination_qmgr.clone());
        kv("agentChunkSize", self.agent_chunk_size.to_string());
        kv("agentWindowSize", self.agent_window_size.to_string());
        kv("agentFrameSize", self.agent_frame_size.to_string());
        kv(
            "agentCheckpointInterval",
            self.agent_checkpoint_interval.to_string(),
        );
        kv("maxSourceTransfers", self.max_source_transfers.to_string());
        kv(
            "maxDestinationTransfers",
            self.max_destination_transfers.to_string(),
        );
        kv(
            "transferRecoveryTimeout",
            self.transfer_recovery_timeout.to_string(),
        );
        if !self.sandbox_root.is_empty() {
            kv("sandboxRoot", self.sandbox_root.clone());
        }
        if self.direct_writes {
            kv("directWrites", "true".into());
        }
        s
    }

    pub fn parse(text: &str) -> Result<AgentProps> {
        let mut p = AgentProps::new("", "");
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
                continue;
            }
            let Some((k, v)) = line.split_once('=') else {
                return err(format!("agent.properties line {}: no '='", n + 1));
            };
            let (k, v) = (k.trim(), v.trim());
            let num = |lo: usize, hi: usize| -> Result<usize> {
                match v.parse::<usize>() {
                    Ok(x) if (lo..=hi).contains(&x) => Ok(x),
                    _ => err(format!(
                        "agent.properties: {k}={v}: give a number from {lo} to {hi}"
                    )),
                }
            };
            match k {
                "agentName" => p.agent_name = v.to_string(),
                "agentQMgr" => p.agent_qmgr = v.to_string(),
                "agentQMgrHost" => p.agent_qmgr_host = Some(v.to_string()),
                "agentQMgrPort" => p.agent_qmgr_port = num(1, 65_535)? as u16,
                "agentQMgrChannel" => p.agent_qmgr_channel = v.to_string(),
                "agentQMgrStandby" => {
                    check_standby(v)?;
                    p.agent_qmgr_standby = v.to_string();
                }
                "agentQMgrAuthenticationCredentialsFile" => p.credentials_file = v.to_string(),
                "agentSslCipherSpec" => p.ssl_cipher_spec = v.to_string(),
                "agentSslTrustStore" => p.ssl_trust_store = v.to_string(),
                "agentSslKeyStore" => p.ssl_key_store = v.to_string(),
                "coordinationQMgr" => p.coordination_qmgr = v.to_string(),
                "agentChunkSize" => p.agent_chunk_size = num(1, FTE_CHUNK_SIZE_MAX_BYTES)?,
                "agentWindowSize" => p.agent_window_size = num(1, FTE_OUTSTANDING_CHUNKS_MAX)?,
                "agentFrameSize" => p.agent_frame_size = num(1, FTE_OUTSTANDING_CHUNKS_MAX)?,
                "agentCheckpointInterval" => p.agent_checkpoint_interval = num(1, 10_000)?,
                "maxSourceTransfers" => p.max_source_transfers = num(1, 1_000)?,
                "maxDestinationTransfers" => p.max_destination_transfers = num(1, 1_000)?,
                "transferRecoveryTimeout" => {
                    p.transfer_recovery_timeout = match v.parse::<i64>() {
                        Ok(x) if x >= -1 => x,
                        _ => {
                            return err(format!(
                                "agent.properties: {k}={v}: give -1 (for ever) or seconds"
                            ))
                        }
                    }
                }
                "directWrites" => {
                    p.direct_writes = match v {
                        "true" => true,
                        "false" => false,
                        _ => return err(format!("agent.properties: {k}={v}: give true or false")),
                    }
                }
                "sandboxRoot" => {
                    crate::sandbox::parse(v)?;
                    p.sandbox_root = v.to_string();
                }
                // Unknown properties are kept by MQ's agents for other features; ignore them.
                _ => {}
            }
        }
        if p.agent_name.is_empty() || p.agent_qmgr.is_empty() {
            return err("agent.properties: agentName and agentQMgr are required");
        }
        if !p.ssl_cipher_spec.is_empty() && p.ssl_trust_store.is_empty() {
            return err(
                "agent.properties: agentSslCipherSpec needs agentSslTrustStore (the CA \
                 certificates, PEM, that the queue manager's certificate must chain to)",
            );
        }
        Ok(p)
    }
}

/// `<home>/mqft`.
/// `agentQMgrStandby`: one or more `host(port)`, comma-separated.
pub fn check_standby(v: &str) -> Result<()> {
    for a in v.split(',') {
        let a = a.trim();
        let ok = a
            .strip_suffix(')')
            .and_then(|x| x.split_once('('))
            .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0));
        if !ok {
            return err(format!(
                "agentQMgrStandby={v}: '{a}' is not host(port); give one or more, comma-separated"
            ));
        }
    }
    Ok(())
}

pub fn mqft_dir(home: &Path) -> PathBuf {
    home.join("mqft")
}

/// `<home>/mqft/agents/<AGENT>`: the agent's properties, pid file and output.
pub fn agent_dir(home: &Path, agent: &str) -> PathBuf {
    mqft_dir(home).join("agents").join(agent)
}

pub fn load(home: &Path, agent: &str) -> Result<AgentProps> {
    let path = agent_dir(home, agent).join("agent.properties");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        crate::FteError(format!(
            "agent '{agent}': {}: {e} (create it with fteCreateAgent)",
            path.display()
        ))
    })?;
    let mut p = AgentProps::parse(&text)?;
    p.sandbox = crate::sandbox::Sandbox::new(home, &p.sandbox_root)?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_round_trip_with_defaults() {
        let p = AgentProps::new("AGENT1", "QM1");
        assert_eq!(p.agent_chunk_size, 262_144);
        assert_eq!(p.outstanding_chunks_max(), 50);
        assert_eq!(AgentProps::parse(&p.to_text()).unwrap(), p);
        assert!(AgentProps::parse("agentName=A\nagentQMgr=Q\nagentChunkSize=0\n").is_err());
        let mut c = AgentProps::new("AGENT1", "QM1");
        c.agent_qmgr_host = Some("10.0.0.1".into());
        c.agent_qmgr_standby = "10.0.0.2(1414), host3(1415)".into();
        c.credentials_file = "/etc/mqft/MQMFTCredentials.xml".into();
        c.ssl_cipher_spec = "ANY_TLS12_OR_HIGHER".into();
        c.ssl_trust_store = "/etc/mqft/ca.pem".into();
        c.ssl_key_store = "/etc/mqft/agent1.pem".into();
        c.direct_writes = true;
        assert!(c.to_text().contains("directWrites=true"));
        assert_eq!(AgentProps::parse(&c.to_text()).unwrap(), c);
        assert!(!p.direct_writes, "page-cache writes by default");
        let e = AgentProps::parse("agentName=A\nagentQMgr=Q\ndirectWrites=yes\n").unwrap_err();
        assert!(e.0.contains("true or false"), "{e:?}");
        let e = AgentProps::parse("agentName=A\nagentQMgr=Q\nagentSslCipherSpec=ANY_TLS12\n")
            .unwrap_err();
        assert!(e.0.contains("agentSslTrustStore"), "{e:?}");
        for bad in ["h", "h(0)", "(1414)", "h(1414),", "h(x)"] {
            let e = AgentProps::parse(&format!("agentQMgrStandby={bad}\n")).unwrap_err();
            assert!(e.0.contains("host(port)"), "{bad}: {e:?}");
        }
    }
}
