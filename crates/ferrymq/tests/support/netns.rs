//! Test networks in Linux network namespaces: a bridge in the root namespace (where the test and
//! its clients live) and one namespace per host, each joined to the bridge by a veth pair. Taking
//! a host's root-side veth down cuts that host off completely, as a pulled cable does: its
//! sockets stay open and nothing arrives, no RST, no FIN.
//!
//! Needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) and iproute2 at [`IP`]; a test that uses it
//! fails, rather than skipping itself, where it cannot build the network.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

pub const IP: &str = "/usr/sbin/ip";

/// Runs `ip ARGS`; its stdout, or why it failed.
pub fn ip(args: &[&str]) -> Result<String, String> {
    let out = Command::new(IP)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {IP}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "`ip {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn ip_ok(args: &[&str]) {
    if let Err(e) = ip(args) {
        panic!("building the test network failed: {e}");
    }
}

/// Networks built by this process so far: each gets its own interface names.
static BUILT: AtomicU32 = AtomicU32::new(0);

/// A bridge and `n` namespaces, each joined to the bridge by a veth pair. Torn down when
/// dropped (also on panic).
pub struct Net {
    pub bridge: String,
    /// The namespaces, by host index.
    pub ns: Vec<String>,
    /// The root-namespace end of each veth pair: taking it down isolates that host.
    host_veth: Vec<String>,
    ns_veth: Vec<String>,
    /// The third octet of the /24 used: 10.213.<subnet>.0/24.
    pub subnet: u8,
}

impl Net {
    /// Builds the network; `tag` names the namespaces (`fmq<tag><pid>…`), `hosts` the
    /// namespaces' suffixes (one character each keeps interface names within 15 bytes).
    pub fn build(tag: &str, hosts: &[&str]) -> Net {
        let pid = std::process::id();
        let k = BUILT.fetch_add(1, Ordering::SeqCst) % 10;
        let net = Net {
            bridge: format!("fmqbr{pid}{k}"),
            ns: hosts
                .iter()
                .map(|n| format!("fmq{tag}{pid}{k}{n}"))
                .collect(),
            host_veth: hosts.iter().map(|n| format!("fmqh{pid}{k}{n}")).collect(),
            ns_veth: hosts.iter().map(|n| format!("fmqn{pid}{k}{n}")).collect(),
            subnet: 0,
        };
        for n in net
            .host_veth
            .iter()
            .chain(&net.ns_veth)
            .chain([&net.bridge])
        {
            assert!(n.len() <= 15, "interface name {n} is too long");
        }
        // Leftovers of an earlier run with the same pid.
        net.teardown();
        let mut net = net;
        net.subnet = free_subnet(pid);
        if let Err(e) = ip(&["netns", "add", &net.ns[0]]) {
            panic!(
                "cannot create a network namespace: {e}\n\
                 This test needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) and iproute2 at {IP}; \
                 it does not skip itself."
            );
        }
        ip_ok(&["link", "add", &net.bridge, "type", "bridge"]);
        let br_addr = format!("10.213.{}.254/24", net.subnet);
        ip_ok(&["addr", "add", &br_addr, "dev", &net.bridge]);
        ip_ok(&["link", "set", &net.bridge, "up"]);
        for i in 0..hosts.len() {
            let (ns, h, n) = (&net.ns[i], &net.host_veth[i], &net.ns_veth[i]);
            if i > 0 {
                ip_ok(&["netns", "add", ns]);
            }
            ip_ok(&["link", "add", h, "type", "veth", "peer", "name", n]);
            ip_ok(&["link", "set", n, "netns", ns]);
            let a = format!("{}/24", net.addr(i));
            ip_ok(&["-n", ns, "addr", "add", &a, "dev", n]);
            ip_ok(&["-n", ns, "link", "set", "lo", "up"]);
            ip_ok(&["-n", ns, "link", "set", n, "up"]);
            ip_ok(&["link", "set", h, "master", &net.bridge]);
            ip_ok(&["link", "set", h, "up"]);
        }
        net
    }

    /// Host `i`'s address.
    pub fn addr(&self, i: usize) -> String {
        format!("10.213.{}.{}", self.subnet, i + 1)
    }

    /// The root namespace's address on the bridge: how a host reaches the test's side.
    pub fn bridge_addr(&self) -> String {
        format!("10.213.{}.254", self.subnet)
    }

    /// Cuts host `i` off: its link goes down, its sockets stay open.
    pub fn cut(&self, i: usize) {
        ip_ok(&["link", "set", &self.host_veth[i], "down"]);
    }

    pub fn heal(&self, i: usize) {
        ip_ok(&["link", "set", &self.host_veth[i], "up"]);
    }

    /// Deletes whatever of this network exists (errors ignored: parts may be missing). The veths
    /// are deleted explicitly because a deleted namespace releases its devices asynchronously.
    fn teardown(&self) {
        for h in &self.host_veth {
            let _ = ip(&["link", "del", h]);
        }
        for ns in &self.ns {
            let _ = ip(&["netns", "del", ns]);
        }
        let _ = ip(&["link", "del", &self.bridge]);
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// A 10.213.x.0/24 no route on this machine mentions, chosen from the pid so that two runs at
/// the same time are unlikely to pick the same one.
fn free_subnet(pid: u32) -> u8 {
    let routes = ip(&["-4", "route", "show", "table", "all"]).unwrap_or_default();
    let addrs = ip(&["-4", "-o", "addr", "show"]).unwrap_or_default();
    (0..200u32)
        .map(|k| ((pid + k) % 200 + 20) as u8)
        .find(|s| {
            let p = format!("10.213.{s}.");
            !routes.contains(&p) && !addrs.contains(&p)
        })
        .expect("a free 10.213.x.0/24")
}
