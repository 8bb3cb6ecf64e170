//! What DISPLAY CHSTATUS and the metrics show of a message channel instance.

use crate::listeners::fmt_date_time;
use crate::storage::now_ms;

/// MQ's channel states, as far as this release has them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Starting,
    Binding,
    Running,
    Retrying,
    Stopped,
    /// Ended normally (DISCINT): it starts again by itself when its transmission queue gets a
    /// message.
    Inactive,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::Starting => "STARTING",
            State::Binding => "BINDING",
            State::Running => "RUNNING",
            State::Retrying => "RETRYING",
            State::Stopped => "STOPPED",
            State::Inactive => "INACTIVE",
        }
    }

    /// The number the metrics give the state (MQ's MQCHS_* values).
    pub fn code(self) -> u32 {
        match self {
            State::Binding => 1,
            State::Starting => 2,
            State::Running => 3,
            State::Stopped => 6,
            State::Retrying => 5,
            State::Inactive => 0,
        }
    }
}

#[derive(Clone, Debug)]
pub struct ChannelStatus {
    pub state: State,
    pub conname: String,
    pub xmitq: String,
    pub started_ms: u64,
    /// Messages and batches moved, bytes sent and received, by this instance.
    pub msgs: u64,
    pub batches: u64,
    pub bytes_sent: u64,
    pub bytes_rcvd: u64,
    /// The batch in progress (sequence number, LUWID) and the last committed one.
    pub cur_seq: u64,
    pub cur_luwid: u64,
    pub last_seq: u64,
    pub last_luwid: u64,
    pub indoubt: bool,
    /// The messages of the last batches, averaged (XQMSGSA: messages on the transmission queue
    /// a batch found available).
    pub xq_msgs_avail: u64,
    /// Why the instance last failed, if it did.
    pub last_error: String,
    /// What the channel is doing now, with MQ's SUBSTATE names (MQGET, SEND, RECEIVE,
    /// HEARTBEATING, END_OF_BATCH, NET_CONNECTING, ...); blank when it is doing nothing.
    pub substate: &'static str,
    /// The negotiated heartbeat interval, in seconds (0: none).
    pub hb_int_s: u32,
    /// STOP CHANNEL was asked and the channel has not ended yet (STOPREQ).
    pub stop_requested: bool,
    /// NETTIME: an end of batch's round trip to the receiver; XQTIME: how long messages waited
    /// on the transmission queue before the channel took them. Microseconds, each as MQ shows
    /// it: a short-term and a long-term average.
    pub net_time: Averages,
    pub xq_time: Averages,
    /// The definition's CHLTYPE (SDR or SVR sending, RCVR or RQSTR receiving); blank: the
    /// registry's default for its side.
    pub chltype: &'static str,
}

/// A value averaged over the short and the long term (exponentially weighted), as MQ's
/// NETTIME and XQTIME show two.
#[derive(Clone, Copy, Debug, Default)]
pub struct Averages {
    pub short: f64,
    pub long: f64,
    seen: bool,
}

impl Averages {
    pub fn add(&mut self, v: f64) {
        if !self.seen {
            (self.short, self.long, self.seen) = (v, v, true);
            return;
        }
        self.short += (v - self.short) * 0.3;
        self.long += (v - self.long) * 0.03;
    }

    fn show(&self) -> String {
        if self.seen {
            format!("{:.0},{:.0}", self.short, self.long)
        } else {
            " , ".to_string()
        }
    }
}

impl ChannelStatus {
    pub fn new(conname: &str, xmitq: &str) -> ChannelStatus {
        ChannelStatus {
            state: State::Starting,
            conname: conname.to_string(),
            xmitq: xmitq.to_string(),
            started_ms: now_ms(),
            msgs: 0,
            batches: 0,
            bytes_sent: 0,
            bytes_rcvd: 0,
            cur_seq: 0,
            cur_luwid: 0,
            last_seq: 0,
            last_luwid: 0,
            indoubt: false,
            xq_msgs_avail: 0,
            last_error: String::new(),
            substate: "",
            hb_int_s: 0,
            stop_requested: false,
            net_time: Averages::default(),
            xq_time: Averages::default(),
            chltype: "",
        }
    }

    pub fn row(&self, name: &str, chltype: &str) -> Vec<(String, String)> {
        let (d, t) = fmt_date_time(self.started_ms);
        let mut row = vec![
            ("CHANNEL".to_string(), name.to_string()),
            ("CHLTYPE".to_string(), chltype.to_string()),
            ("CONNAME".to_string(), self.conname.clone()),
            ("CURRENT".to_string(), String::new()),
            ("STATUS".to_string(), self.state.name().to_string()),
        ];
        if chltype == "SDR" || chltype == "SVR" {
            row.push(("XMITQ".to_string(), self.xmitq.clone()));
        }
        row.extend([
            (
                "STOPREQ".to_string(),
                if self.stop_requested { "YES" } else { "NO" }.to_string(),
            ),
            ("SUBSTATE".to_string(), self.substate.to_string()),
            ("HBINT".to_string(), self.hb_int_s.to_string()),
            (
                "INDOUBT".to_string(),
                if self.indoubt { "YES" } else { "NO" }.to_string(),
            ),
            ("CURSEQNO".to_string(), self.cur_seq.to_string()),
            ("LSTSEQNO".to_string(), self.last_seq.to_string()),
            ("CURLUWID".to_string(), format!("{:016X}", self.cur_luwid)),
            ("LSTLUWID".to_string(), format!("{:016X}", self.last_luwid)),
            ("MSGS".to_string(), self.msgs.to_string()),
            ("BATCHES".to_string(), self.batches.to_string()),
            ("BYTSSENT".to_string(), self.bytes_sent.to_string()),
            ("BYTSRCVD".to_string(), self.bytes_rcvd.to_string()),
            ("CHSTADA".to_string(), d),
            ("CHSTATI".to_string(), t),
        ]);
        if chltype == "SDR" || chltype == "SVR" {
            row.push(("XQMSGSA".to_string(), self.xq_msgs_avail.to_string()));
            row.push(("NETTIME".to_string(), self.net_time.show()));
            row.push(("XQTIME".to_string(), self.xq_time.show()));
        }
        row
    }
}
