//! Declarative configuration: at every start (on an HA group, each time an instance becomes
//! active), the `*.mqsc` files of the AutoConfig directory (qm.ini `AutoConfig:MQSCConfig`, by
//! default `<qmdir>/autocfg`) are run in name order, as runmqsc would run them. They are meant to
//! be idempotent (DEFINE ... REPLACE, SET ... ACTION(REPLACE)), so applying them again gives the
//! same state. Each file's outcome goes to the error log; a command that fails is logged with its
//! file and line and the queue manager runs on, as MQ's AutoConfig does.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ferrymq_admin::execute_text;
use ferrymq_mqsc::split_commands;
use ferrymq_types::limits::AUTOCONFIG_FILE_BYTES_MAX;

use crate::admin_ops::Ops;
use crate::errlog::ids;
use crate::qm_log;
use crate::qmgr::Shared;
use crate::storage::now_ms;

/// The `*.mqsc` files of `dir`, in name order; none if the directory does not exist.
fn files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot read {}: {e}", dir.display())),
    };
    let mut v: Vec<PathBuf> = rd
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "mqsc"))
        .collect();
    v.sort();
    Ok(v)
}

/// Applies every file; never fails (what went wrong is in the error log).
pub fn apply(shared: &Arc<Shared>) {
    let Some(dir) = shared.cfg.autoconfig_dir.clone() else {
        return;
    };
    let list = match files(&dir) {
        Ok(l) => l,
        Err(e) => {
            qm_log!(ids::AUTOCONFIG_FAILED, "AutoConfig: {e}");
            return;
        }
    };
    for path in list {
        let name = path.display().to_string();
        let text = match std::fs::metadata(&path) {
            Ok(m) if m.len() > AUTOCONFIG_FILE_BYTES_MAX => Err(format!(
                "it is {} bytes, more than the {AUTOCONFIG_FILE_BYTES_MAX} an AutoConfig file may hold",
                m.len()
            )),
            _ => std::fs::read_to_string(&path).map_err(|e| e.to_string()),
        };
        let text = match text {
            Ok(t) => t,
            Err(e) => {
                qm_log!(
                    ids::AUTOCONFIG_FAILED,
                    "AutoConfig {name}: not applied: {e}"
                );
                continue;
            }
        };
        let (mut run, mut failed) = (0usize, 0usize);
        for cmd in split_commands(&text) {
            if ferrymq_mqsc::parse(&cmd.text).is_ok_and(|c| c == ferrymq_mqsc::Command::End) {
                break;
            }
            run += 1;
            let r = {
                let mut core = shared.core.lock();
                let r = execute_text(
                    &cmd.text,
                    &mut core.engine,
                    &mut Ops {
                        shared,
                        viewer: None,
                    },
                    now_ms(),
                );
                core.flush_deliveries();
                r
            };
            if !r.ok {
                failed += 1;
                let first = r.text.lines().next().unwrap_or("").to_string();
                let reason = r
                    .text
                    .lines()
                    .find(|l| l.trim_start().starts_with("Reason:"))
                    .map(|l| format!(" ({})", l.trim()))
                    .unwrap_or_default();
                qm_log!(
                    ids::AUTOCONFIG_FAILED,
                    "AutoConfig {name} line {}: {}: {first}{reason}",
                    cmd.line,
                    cmd.text.split_whitespace().collect::<Vec<_>>().join(" ")
                );
            }
        }
        qm_log!(
            ids::AUTOCONFIG_APPLIED,
            "AutoConfig {name}: {run} command(s) run, {failed} failed"
        );
    }
}
