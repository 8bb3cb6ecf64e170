//! Asynchronous put response (MQPMO_ASYNC_RESPONSE): a put the client does not wait for is
//! carried out in order like any request, but answered by nothing. What became of such puts
//! is kept per conversation, in a fixed-size record (counts and the first failure, never a
//! list), until MQSTAT fetches and resets it; a failed one under syncpoint dooms the unit of
//! work, so that the commit backs it out (MQ's rule).

use ferrymq_engine::Lsn;
use ferrymq_proto::Response;
use ferrymq_types::{MqError, Reason};

/// MQSTS of one conversation's asynchronous puts since its last MQSTAT.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct AsyncStatus {
    pub succeeded: u64,
    pub warned: u64,
    pub failed: u64,
    /// The first failure's reason and the object it was put to; a warning when nothing failed.
    pub first: Option<(Reason, bool, String)>,
    /// A put under syncpoint failed since the last commit or backout.
    pub uow_doomed: bool,
    /// The log position the puts counted so far are durable at: MQSTAT answers once the log is
    /// durable up to it.
    pub lsn: Lsn,
}

/// MQ's completion codes as MQSTS reports them.
const MQCC_OK: u32 = 0;
const MQCC_WARNING: u32 = 1;
const MQCC_FAILED: u32 = 2;

impl AsyncStatus {
    /// Counts one asynchronous put: `Ok((None, lsn))` done, `Ok((Some(w), lsn))` done with
    /// warning `w`, `Err` failed; `lsn` is where its log record ends. `object` names what it was put to, asked only when it is kept.
    pub fn record(
        &mut self,
        under_syncpoint: bool,
        outcome: Result<(Option<Reason>, Lsn), &MqError>,
        object: impl FnOnce() -> String,
    ) {
        if let Ok((_, lsn)) = outcome {
            self.lsn = self.lsn.max(lsn);
        }
        match outcome {
            Ok((None, _)) => self.succeeded += 1,
            Ok((Some(w), _)) => {
                self.warned += 1;
                if self.first.is_none() {
                    self.first = Some((w, false, object()));
                }
            }
            Err(e) => {
                self.failed += 1;
                if under_syncpoint {
                    self.uow_doomed = true;
                }
                if !matches!(self.first, Some((_, true, _))) {
                    self.first = Some((e.reason, true, object()));
                }
            }
        }
    }

    /// The MQSTAT answer, which starts the next period: PUTSUCCESS, PUTWARNING, PUTFAILURE,
    /// COMPCODE, REASON and OBJNAME. The unit of work stays doomed until it ends.
    pub fn take(&mut self) -> (Response, Lsn) {
        let (cc, reason, object) = match self.first.take() {
            None => (MQCC_OK, 0, String::new()),
            Some((r, true, o)) => (MQCC_FAILED, r.code(), o),
            Some((r, false, o)) => (MQCC_WARNING, r.code(), o),
        };
        let attrs = vec![
            ("PUTSUCCESS".to_string(), self.succeeded.to_string()),
            ("PUTWARNING".to_string(), self.warned.to_string()),
            ("PUTFAILURE".to_string(), self.failed.to_string()),
            ("COMPCODE".to_string(), cc.to_string()),
            ("REASON".to_string(), reason.to_string()),
            ("OBJNAME".to_string(), object),
        ];
        self.succeeded = 0;
        self.warned = 0;
        self.failed = 0;
        (Response::InquireReply { attrs }, self.lsn)
    }

    /// At a commit: the error to answer with, when an asynchronous put of the unit of work
    /// failed (the caller backs it out). Either way the unit of work ends.
    pub fn doomed_commit(&mut self) -> Option<MqError> {
        if !std::mem::take(&mut self.uow_doomed) {
            return None;
        }
        Some(MqError::new(
            Reason::BACKED_OUT,
            "the unit of work was backed out: an asynchronous put in it failed (MQSTAT tells which)",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(r: &Response, k: &str) -> String {
        let Response::InquireReply { attrs } = r else {
            panic!("not an InquireReply: {r:?}")
        };
        attrs.iter().find(|(n, _)| n == k).unwrap().1.clone()
    }

    #[test]
    fn the_first_failure_is_kept_over_warnings_and_later_failures() {
        let mut s = AsyncStatus::default();
        s.record(false, Ok((None, 7)), || unreachable!());
        s.record(false, Ok((Some(Reason::NO_SUBS_MATCHED), 9)), || "T".into());
        let full = MqError::new(Reason::Q_FULL, "full");
        s.record(false, Err(&full), || "Q1".into());
        let unknown = MqError::new(Reason::UNKNOWN_OBJECT_NAME, "no");
        s.record(false, Err(&unknown), || "Q2".into());
        assert!(!s.uow_doomed);
        let (r, lsn) = s.take();
        assert_eq!(lsn, 9);
        assert_eq!(attr(&r, "PUTSUCCESS"), "1");
        assert_eq!(attr(&r, "PUTWARNING"), "1");
        assert_eq!(attr(&r, "PUTFAILURE"), "2");
        assert_eq!(attr(&r, "COMPCODE"), "2");
        assert_eq!(attr(&r, "REASON"), "2053");
        assert_eq!(attr(&r, "OBJNAME"), "Q1");
        let (r, _) = s.take();
        assert_eq!(attr(&r, "PUTFAILURE"), "0");
        assert_eq!(attr(&r, "COMPCODE"), "0");
    }

    #[test]
    fn a_failed_put_under_syncpoint_dooms_the_commit_once() {
        let mut s = AsyncStatus::default();
        s.record(true, Err(&MqError::new(Reason::Q_FULL, "")), || "Q".into());
        assert_eq!(s.doomed_commit().unwrap().reason, Reason::BACKED_OUT);
        assert!(s.doomed_commit().is_none());
    }
}
