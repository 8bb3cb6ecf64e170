//! dmpmqcfg: the queue manager's configuration as MQSC that runmqsc replays onto another queue
//! manager to the same state (or as JSON with the same content). The queue manager's attributes
//! come first as ALTER QMGR, then every object that is not a SYSTEM one as DEFINE ... REPLACE with
//! every attribute it can be given, then channel authentication and authority records as SET
//! commands. Read-only attributes (depths, dates, QMID) are not commands; the header comment
//! names the queue manager and its QMID.

use ferrymq_engine::Engine;
use ferrymq_types::{ObjectDef, ObjectKind, QueueDef};

use super::{object, queue};
use ferrymq_mqsc::attrs::{self, AttrSpec, ValueKind, QMGR};
use ferrymq_mqsc::format::{mq_date, mq_time};

/// What a dump holds (`dmpmqcfg -x`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DumpScope {
    All,
    /// The queue manager's attributes and its objects.
    Object,
    AuthRec,
    ChlAuth,
}

impl DumpScope {
    pub fn from_word(w: &str) -> Option<DumpScope> {
        Some(match w.to_ascii_lowercase().as_str() {
            "all" => DumpScope::All,
            "object" => DumpScope::Object,
            "authrec" => DumpScope::AuthRec,
            "chlauth" => DumpScope::ChlAuth,
            _ => return None,
        })
    }
}

/// One command of a dump.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    /// `ALTER`, `DEFINE` or `SET`.
    verb: &'static str,
    /// `QMGR`, `QLOCAL`, `CHANNEL`, `CHLAUTH`, `AUTHREC`...
    object: &'static str,
    /// The object's name (empty for QMGR and AUTHREC).
    name: String,
    /// Keyword and value; a switch's value is its word alone (`bare`).
    attrs: Vec<(String, String, Style)>,
    /// The closing keyword (REPLACE, ACTION(REPLACE)), if any.
    tail: &'static str,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Style {
    /// Quoted text: names and free text keep their case.
    Quoted,
    /// A number or keyword value.
    Word,
    /// A switch (SHARE or NOSHARE): the word stands alone.
    Bare,
    /// A list of quoted items, stored comma-separated.
    List,
}

fn style(spec: &AttrSpec) -> Style {
    match spec.kind {
        ValueKind::Str { .. } | ValueKind::Name => Style::Quoted,
        ValueKind::Switch { .. } => Style::Bare,
        _ => Style::Word,
    }
}

fn quote(v: &str) -> String {
    format!("'{}'", v.replace('\'', "''"))
}

fn render_value(v: &str, st: Style) -> String {
    match st {
        Style::Quoted => quote(v),
        Style::List => v.split(',').map(quote).collect::<Vec<_>>().join(","),
        Style::Word | Style::Bare => v.to_string(),
    }
}

impl Entry {
    fn mqsc(&self) -> String {
        let mut lines = vec![if self.name.is_empty() {
            format!("{} {}", self.verb, self.object)
        } else {
            format!("{} {}({})", self.verb, self.object, quote(&self.name))
        }];
        for (k, v, st) in &self.attrs {
            lines.push(match st {
                Style::Bare => format!("   {v}"),
                _ => format!("   {k}({})", render_value(v, *st)),
            });
        }
        if !self.tail.is_empty() {
            lines.push(format!("   {}", self.tail));
        }
        lines.join(" +\n")
    }

    fn json(&self) -> String {
        let attrs: Vec<String> = self
            .attrs
            .iter()
            .map(|(k, v, _)| format!("{}:{}", json_str(k), json_str(v)))
            .collect();
        format!(
            "{{\"verb\":{},\"type\":{},\"name\":{},\"attributes\":{{{}}}}}",
            json_str(self.verb),
            json_str(self.object),
            json_str(&self.name),
            attrs.join(",")
        )
    }
}

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn is_system(name: &str) -> bool {
    name.starts_with("SYSTEM.")
}

fn qmgr_entry(engine: &Engine) -> Entry {
    let fields = object::qmgr_fields(engine);
    let attrs = QMGR
        .iter()
        .filter(|s| s.settable())
        .filter_map(|s| {
            let v = fields.iter().find(|f| f.name == s.name)?;
            Some((s.name.to_string(), v.value.clone(), style(s)))
        })
        .collect();
    Entry {
        verb: "ALTER",
        object: "QMGR",
        name: String::new(),
        attrs,
        tail: "",
    }
}

fn queue_entry(d: &QueueDef) -> Entry {
    let t = queue::obj_type(&d.kind);
    let attrs = attrs::table(t)
        .iter()
        .filter(|s| s.settable())
        .filter_map(|s| Some((s.name.to_string(), queue::value(d, None, s)?, style(s))))
        .collect();
    Entry {
        verb: "DEFINE",
        object: t.keyword(),
        name: d.name.clone(),
        attrs,
        tail: "REPLACE",
    }
}

fn object_entry(o: &ObjectDef) -> Entry {
    let t = object::obj_type(o.kind);
    let table = attrs::table(t);
    let attrs = object::fields(o)
        .into_iter()
        .filter_map(|f| {
            let spec = table.iter().find(|s| s.name == f.name)?;
            spec.settable()
                .then(|| (f.name.clone(), f.value.clone(), style(spec)))
        })
        .collect();
    Entry {
        verb: "DEFINE",
        object: t.keyword(),
        name: o.name.clone(),
        attrs,
        tail: "REPLACE",
    }
}

/// An administrative subscription (DEFINE SUB); subscriptions applications made are theirs to
/// make again, as MQ's dmpmqcfg leaves them out.
fn sub_entry(o: &ObjectDef) -> Entry {
    let get = |k: &str| o.attrs.get(k).cloned().unwrap_or_default();
    let managed = get("DESTCLAS") == "MANAGED";
    let mut attrs = Vec::new();
    for (k, st) in [
        ("TOPICSTR", Style::Quoted),
        ("DEST", Style::Quoted),
        ("DESTQMGR", Style::Quoted),
        ("DESTCLAS", Style::Word),
        ("SELECTOR", Style::Quoted),
        ("EXPIRY", Style::Word),
        ("USERDATA", Style::Quoted),
        ("REQONLY", Style::Word),
    ] {
        let v = get(k);
        if (k == "DEST" && managed) || (v.is_empty() && k != "TOPICSTR") {
            continue;
        }
        attrs.push((k.to_string(), v, st));
    }
    // Stored only when not the default (WSCHEMA(TOPIC), no DESTCORL).
    if get("WSCHEMA") == "CHAR" {
        attrs.push(("WSCHEMA".into(), "CHAR".into(), Style::Word));
    }
    let correl = get("SUBCORRELID");
    if !correl.is_empty() {
        attrs.push(("DESTCORL".into(), correl, Style::Word));
    }
    Entry {
        verb: "DEFINE",
        object: "SUB",
        name: o.name.clone(),
        attrs,
        tail: "REPLACE",
    }
}

fn chlauth_entry(o: &ObjectDef) -> Entry {
    let get = |k: &str| o.attrs.get(k).cloned().unwrap_or_default();
    let mut attrs = vec![("TYPE".to_string(), get("TYPE"), Style::Word)];
    for (k, st) in [
        ("ADDRESS", Style::Quoted),
        ("CLNTUSER", Style::Quoted),
        ("SSLPEER", Style::Quoted),
        ("SSLCERTI", Style::Quoted),
        ("QMNAME", Style::Quoted),
        ("USERLIST", Style::List),
        ("ADDRLIST", Style::List),
        ("USERSRC", Style::Word),
        ("MCAUSER", Style::Quoted),
        ("CHCKCLNT", Style::Word),
        ("DESCR", Style::Quoted),
        ("CUSTOM", Style::Quoted),
        ("WARN", Style::Word),
    ] {
        if let Some(v) = o.attrs.get(k) {
            attrs.push((k.to_string(), v.clone(), st));
        }
    }
    Entry {
        verb: "SET",
        object: "CHLAUTH",
        name: get("CHLAUTH"),
        attrs,
        tail: "ACTION(REPLACE)",
    }
}

fn authrec_entry(o: &ObjectDef) -> Entry {
    let get = |k: &str| o.attrs.get(k).cloned().unwrap_or_default();
    let mut attrs = Vec::new();
    let objtype = get("OBJTYPE");
    if objtype != "QMGR" {
        attrs.push(("PROFILE".to_string(), get("PROFILE"), Style::Quoted));
    }
    attrs.push(("OBJTYPE".to_string(), objtype, Style::Word));
    attrs.push((get("ENTTYPE"), get("ENTITY"), Style::Quoted));
    attrs.push(("AUTHADD".to_string(), get("AUTHLIST"), Style::Word));
    Entry {
        verb: "SET",
        object: "AUTHREC",
        name: String::new(),
        attrs,
        tail: "",
    }
}

fn entries(engine: &Engine, scope: DumpScope) -> Vec<Entry> {
    let mut out = Vec::new();
    let want = |s: DumpScope| scope == DumpScope::All || scope == s;
    if want(DumpScope::Object) {
        out.push(qmgr_entry(engine));
        // Local queues first: aliases and remote queues may name them.
        let mut queues: Vec<&QueueDef> = engine
            .queue_defs()
            .into_iter()
            .filter(|d| !is_system(&d.name) && d.dynamic.is_none())
            .collect();
        queues.sort_by_key(|d| (queue::obj_type(&d.kind) as u8, d.name.clone()));
        out.extend(queues.into_iter().map(queue_entry));
        for kind in [
            ObjectKind::AuthInfo,
            ObjectKind::Listener,
            ObjectKind::Channel,
            ObjectKind::Topic,
        ] {
            out.extend(
                engine
                    .objects()
                    .filter(|o| o.kind == kind && !is_system(&o.name))
                    .map(object_entry),
            );
        }
        // The full topic string is dumped (TOPICOBJ only named where it started), so the
        // subscriptions come after the topic objects without depending on them.
        out.extend(
            engine
                .objects()
                .filter(|o| {
                    o.kind == ObjectKind::Sub
                        && o.attrs.get("SUBTYPE").map(String::as_str) == Some("ADMIN")
                })
                .map(sub_entry),
        );
    }
    let records = |kind: ObjectKind| {
        let mut v: Vec<&ObjectDef> = engine.objects().filter(|o| o.kind == kind).collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    };
    if want(DumpScope::ChlAuth) {
        out.extend(records(ObjectKind::ChlAuth).into_iter().map(chlauth_entry));
    }
    if want(DumpScope::AuthRec) {
        out.extend(records(ObjectKind::AuthRec).into_iter().map(authrec_entry));
    }
    out
}

/// The configuration as an MQSC script (`json`: a JSON document with the same commands). Lines
/// starting `*` are comments: the header, with the queue manager's name, QMID and the time of
/// the dump, is the only part that differs between two queue managers of the same configuration.
pub fn dump_config(engine: &Engine, scope: DumpScope, json: bool, now_ms: u64) -> String {
    let entries = entries(engine, scope);
    let a = engine.attrs();
    if json {
        let cmds: Vec<String> = entries.iter().map(Entry::json).collect();
        return format!(
            "{{\"qmgr\":{},\"qmid\":{},\"cmdlevel\":{},\"dumped\":{},\"commands\":[\n{}\n]}}\n",
            json_str(engine.qmgr_name()),
            json_str(&a.qmid),
            attrs::CMDLEVEL,
            json_str(&format!("{} {}", mq_date(now_ms), mq_time(now_ms))),
            cmds.join(",\n")
        );
    }
    let mut out = format!(
        "* FerryMQ dmpmqcfg of queue manager {}\n* QMID({}) CMDLEVEL({})\n* Dumped {} {} (UTC)\n",
        engine.qmgr_name(),
        a.qmid,
        attrs::CMDLEVEL,
        mq_date(now_ms),
        mq_time(now_ms)
    );
    for e in &entries {
        out.push_str(&e.mqsc());
        out.push('\n');
    }
    out
}
