//! Queue monitors (`fteCreateMonitor -mq QUEUE`): each message on the queue, of the agent's
//! queue manager, triggers the monitor's task once. The message is taken and the task put on
//! the agent's command queue in one unit of work, so a message triggers exactly once whatever
//! fails. In the task, `${QueueName}` stands for the queue and `${NAME}` for the message's
//! property NAME (a string or a number), so that the application that puts the message says
//! which file to move (`${FileName}` from a property FileName).

use std::path::Path;

use ferrymq_client::blocking::Connection;
use ferrymq_client::ObjectHandle;
use ferrymq_types::limits::{FTE_MONITOR_MSGS_PER_POLL_MAX, FTE_REQUEST_LEN_MAX_BYTES};
use ferrymq_types::options::{open, GetOptions, PutOptions, Syncpoint, Wait};
use ferrymq_types::{PropertyValue, Reason};
use quick_xml::escape::escape;

use crate::monitor::{dir, put_task, Monitor, PollError};
use crate::props::AgentProps;
use crate::FteError;

/// The task for one message: `${QueueName}` and its properties' values (XML-escaped).
pub fn substitute(task: &str, queue: &str, props: &ferrymq_types::Properties) -> String {
    let mut out = task.replace("${QueueName}", &escape(queue));
    for (k, v) in &props.0 {
        let v = match v {
            PropertyValue::String(s) => s.clone(),
            PropertyValue::Int(i) => i.to_string(),
            PropertyValue::Float(f) => f.to_string(),
            PropertyValue::Bool(b) => b.to_string(),
            PropertyValue::Bytes(_) => continue,
        };
        out = out.replace(&format!("${{{k}}}"), &escape(&v));
    }
    out
}

pub(crate) fn poll(
    home: &Path,
    c: &Connection,
    cmd_q: &ObjectHandle,
    p: &AgentProps,
    m: &Monitor,
    queue: &str,
) -> Result<(), PollError> {
    let d = dir(home, &p.agent_name);
    let task_path = d.join(format!("{}.task.xml", m.name));
    let task = std::fs::read_to_string(&task_path)
        .map_err(|e| FteError(format!("{}: {e}", task_path.display())))?;
    let h = c.open(queue, open::INPUT_SHARED)?;
    let gopts = GetOptions {
        wait: Wait::NoWait,
        syncpoint: Syncpoint::Yes,
        max_len: FTE_REQUEST_LEN_MAX_BYTES as u32,
        accept_truncated: true,
        ..Default::default()
    };
    let popts = PutOptions {
        syncpoint: Syncpoint::Yes,
        ..Default::default()
    };
    let mut r = Ok(());
    for _ in 0..FTE_MONITOR_MSGS_PER_POLL_MAX {
        let msg = match c.get(&h, &gopts) {
            Ok(msg) => msg,
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => break,
            Err(e) => {
                r = Err(e.into());
                break;
            }
        };
        let xml = substitute(&task, queue, &msg.props);
        if let Err(e) = put_task(c, cmd_q, xml, &popts).and_then(|_| Ok(c.commit()?)) {
            let _ = c.backout();
            r = Err(e);
            break;
        }
        eprintln!(
            "fte agent {}: monitor {} fired for a message on {queue}",
            p.agent_name, m.name
        );
    }
    let _ = c.close(&h, 0);
    r
}
