//! The transfer request and MQ's XML format for it: `<request><managedTransfer>` with
//! `sourceAgent`, `destinationAgent`, a `transferSet` of `item`s (`source` file or directory,
//! `destination` file or directory, mode, checksum method, exists policy, disposition) and an
//! optional `job` name. Requests written by fteCreateTransfer and requests an application puts
//! on an agent's command queue are read by the same parser.

use ferrymq_types::limits::{FTE_FILES_PER_TRANSFER_MAX, FTE_FILE_NAME_LEN_MAX};
use quick_xml::escape::escape;
use quick_xml::events::Event;

use crate::checksum::Method;
use crate::{err, FteError, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    #[default]
    Binary,
    Text,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Exist {
    #[default]
    Error,
    Overwrite,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Disposition {
    #[default]
    Leave,
    Delete,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Item {
    pub source: String,
    pub recursive: bool,
    pub disposition: Disposition,
    /// The destination names a directory (`-dd`) rather than a file (`-df`).
    pub dest_is_dir: bool,
    pub dest: String,
    pub exist: Exist,
    pub mode: Mode,
    pub checksum: Method,
    /// Text mode: the source's encoding (empty: UTF-8), the destination's, and the
    /// destination's line ending (empty: LF).
    pub source_encoding: String,
    pub dest_encoding: String,
    pub dest_eol: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TransferRequest {
    pub source_agent: String,
    pub source_qmgr: String,
    pub dest_agent: String,
    pub dest_qmgr: String,
    pub job_name: Option<String>,
    pub items: Vec<Item>,
}

fn attr_escape(s: &str) -> String {
    escape(s).into_owned()
}

fn opt_attr(name: &str, v: &str) -> String {
    if v.is_empty() {
        String::new()
    } else {
        format!(" {name}=\"{}\"", attr_escape(v))
    }
}

impl TransferRequest {
    pub fn to_xml(&self) -> String {
        let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        s.push_str("<request version=\"6.00\"><managedTransfer>\n");
        s.push_str(&format!(
            "<sourceAgent agent=\"{}\" QMgr=\"{}\"/>\n",
            attr_escape(&self.source_agent),
            attr_escape(&self.source_qmgr)
        ));
        s.push_str(&format!(
            "<destinationAgent agent=\"{}\" QMgr=\"{}\"/>\n",
            attr_escape(&self.dest_agent),
            attr_escape(&self.dest_qmgr)
        ));
        s.push_str("<transferSet>\n");
        for it in &self.items {
            s.push_str(&format!(
                "<item mode=\"{}\" checksumMethod=\"{}\">\n",
                match it.mode {
                    Mode::Binary => "binary",
                    Mode::Text => "text",
                },
                it.checksum.name()
            ));
            s.push_str(&format!(
                "<source recursive=\"{}\" disposition=\"{}\"><file{}>{}</file></source>\n",
                it.recursive,
                match it.disposition {
                    Disposition::Leave => "leave",
                    Disposition::Delete => "delete",
                },
                opt_attr("encoding", &it.source_encoding),
                escape(&it.source)
            ));
            s.push_str(&format!(
                "<destination type=\"{}\" exist=\"{}\"><file{}{}>{}</file></destination>\n",
                if it.dest_is_dir { "directory" } else { "file" },
                match it.exist {
                    Exist::Error => "error",
                    Exist::Overwrite => "overwrite",
                },
                opt_attr("encoding", &it.dest_encoding),
                opt_attr("EOL", &it.dest_eol),
                escape(&it.dest)
            ));
            s.push_str("</item>\n");
        }
        s.push_str("</transferSet>\n");
        if let Some(j) = &self.job_name {
            s.push_str(&format!("<job><name>{}</name></job>\n", escape(j)));
        }
        s.push_str("</managedTransfer></request>\n");
        s
    }

    /// A request; an item that names no `checksumMethod` gets [`Method::default`].
    pub fn from_xml(xml: &str) -> Result<TransferRequest> {
        TransferRequest::from_xml_with_default(xml, Method::default())
    }

    /// A request whose items that name no `checksumMethod` get `default_method` (a transfer
    /// recorded by an agent whose default differed resumes with that agent's default).
    pub fn from_xml_with_default(xml: &str, default_method: Method) -> Result<TransferRequest> {
        TransferRequest::parse(xml, default_method, false)
    }

    /// A transfer definition file (`fteCreateTransfer -td`) in either of MQ's two forms: a whole
    /// `<request>`, as `-gt` writes, or a `<transferSpecifications>` of items only, whose agents
    /// the command line names. Agents it does not name are left empty for the caller to fill.
    pub fn from_definition_xml(xml: &str) -> Result<TransferRequest> {
        TransferRequest::parse(xml, Method::default(), true)
    }

    fn parse(xml: &str, default_method: Method, definition: bool) -> Result<TransferRequest> {
        let bad = |m: String| FteError(format!("transfer request XML: {m}"));
        let mut r = quick_xml::Reader::from_str(xml);
        let mut path: Vec<String> = Vec::new();
        let mut req = TransferRequest::default();
        let mut saw_managed = false;
        loop {
            let ev = r.read_event().map_err(|e| bad(e.to_string()))?;
            let (start, empty) = match &ev {
                Event::Start(e) => (Some(e.clone()), false),
                Event::Empty(e) => (Some(e.clone()), true),
                _ => (None, false),
            };
            if let Some(e) = start {
                let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
                if path.len() > 16 {
                    return Err(bad("elements nest too deeply".into()));
                }
                let mut attrs = Vec::new();
                for a in e.attributes() {
                    let a = a.map_err(|e| bad(e.to_string()))?;
                    let v = a.unescape_value().map_err(|e| bad(e.to_string()))?;
                    attrs.push((
                        String::from_utf8_lossy(a.key.as_ref()).into_owned(),
                        v.into_owned(),
                    ));
                }
                let get = |k: &str| {
                    attrs
                        .iter()
                        .find(|(n, _)| n == k)
                        .map(|(_, v)| v.clone())
                        .unwrap_or_default()
                };
                match name.as_str() {
                    "managedTransfer" => saw_managed = true,
                    "transferSpecifications" if definition && path.is_empty() => saw_managed = true,
                    "sourceAgent" => {
                        req.source_agent = get("agent");
                        req.source_qmgr = get("QMgr");
                    }
                    "destinationAgent" => {
                        req.dest_agent = get("agent");
                        req.dest_qmgr = get("QMgr");
                    }
                    "item" => {
                        if req.items.len() >= FTE_FILES_PER_TRANSFER_MAX {
                            return Err(bad("too many items".into()));
                        }
                        let mode = match get("mode").as_str() {
                            "" | "binary" => Mode::Binary,
                            "text" => Mode::Text,
                            m => return Err(bad(format!("item mode '{m}': binary or text"))),
                        };
                        let cs = get("checksumMethod");
                        let checksum = if cs.is_empty() {
                            default_method
                        } else {
                            Method::parse(&cs).ok_or_else(|| {
                                bad(format!(
                                    "checksumMethod '{cs}': BLAKE3, SHA-256, MD5 or none"
                                ))
                            })?
                        };
                        req.items.push(Item {
                            mode,
                            checksum,
                            ..Item::default()
                        });
                    }
                    "source" => {
                        let it = req
                            .items
                            .last_mut()
                            .ok_or_else(|| bad("<source> outside <item>".into()))?;
                        it.recursive = get("recursive") == "true";
                        it.disposition = match get("disposition").as_str() {
                            "" | "leave" => Disposition::Leave,
                            "delete" => Disposition::Delete,
                            d => return Err(bad(format!("disposition '{d}': leave or delete"))),
                        };
                    }
                    "destination" => {
                        let it = req
                            .items
                            .last_mut()
                            .ok_or_else(|| bad("<destination> outside <item>".into()))?;
                        it.dest_is_dir = match get("type").as_str() {
                            "" | "file" => false,
                            "directory" => true,
                            t => return Err(bad(format!("destination type '{t}'"))),
                        };
                        it.exist = match get("exist").as_str() {
                            "" | "error" => Exist::Error,
                            "overwrite" => Exist::Overwrite,
                            x => return Err(bad(format!("exist '{x}': error or overwrite"))),
                        };
                    }
                    "file" => {
                        let parent = path.last().map(String::as_str).unwrap_or("");
                        if let Some(it) = req.items.last_mut() {
                            let (enc, eol) = (get("encoding"), get("EOL"));
                            if parent == "source" {
                                it.source_encoding = enc;
                            } else if parent == "destination" {
                                it.dest_encoding = enc;
                                it.dest_eol = eol;
                            }
                        }
                    }
                    _ => {}
                }
                if !empty {
                    path.push(name);
                }
                continue;
            }
            match ev {
                Event::Text(t) => {
                    let text = t.unescape().map_err(|e| bad(e.to_string()))?.into_owned();
                    let n = path.len();
                    if n >= 2 && path[n - 1] == "file" {
                        if text.len() > FTE_FILE_NAME_LEN_MAX {
                            return Err(bad("a file name is too long".into()));
                        }
                        if let Some(it) = req.items.last_mut() {
                            match path[n - 2].as_str() {
                                "source" => it.source = text,
                                "destination" => it.dest = text,
                                _ => {}
                            }
                        }
                    } else if n >= 2 && path[n - 1] == "name" && path[n - 2] == "job" {
                        req.job_name = Some(text);
                    }
                }
                Event::End(_) => {
                    path.pop();
                }
                Event::Eof => break,
                _ => {}
            }
        }
        if !saw_managed {
            return Err(bad(if definition {
                "no <managedTransfer> (a <request>) and no <transferSpecifications>".into()
            } else {
                "no <managedTransfer>".into()
            }));
        }
        if !definition && (req.source_agent.is_empty() || req.dest_agent.is_empty()) {
            return Err(bad("sourceAgent and destinationAgent need an agent".into()));
        }
        if req.items.is_empty() {
            return Err(bad("no <item> in <transferSet>".into()));
        }
        for it in &req.items {
            if it.source.is_empty() || it.dest.is_empty() {
                return err(
                    "transfer request XML: each item needs a source and a destination file",
                );
            }
        }
        Ok(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_survives_xml_with_awkward_names() {
        let req = TransferRequest {
            source_agent: "A1".into(),
            source_qmgr: "QM1".into(),
            dest_agent: "B1".into(),
            dest_qmgr: "QM2".into(),
            job_name: Some("nightly <1>".into()),
            items: vec![Item {
                source: "/data/a&b \"x\".txt".into(),
                recursive: true,
                disposition: Disposition::Delete,
                dest_is_dir: true,
                dest: "/in".into(),
                exist: Exist::Overwrite,
                mode: Mode::Text,
                checksum: Method::Md5,
                source_encoding: "ISO-8859-1".into(),
                dest_encoding: String::new(),
                dest_eol: "CRLF".into(),
            }],
        };
        assert_eq!(TransferRequest::from_xml(&req.to_xml()).unwrap(), req);
        assert!(TransferRequest::from_xml("<request/>").is_err());
    }

    fn sample() -> TransferRequest {
        TransferRequest {
            source_agent: "A1".into(),
            source_qmgr: "QM1".into(),
            dest_agent: "B1".into(),
            dest_qmgr: "QM2".into(),
            job_name: Some("job".into()),
            items: vec![Item {
                source: "/data/a.txt".into(),
                recursive: false,
                disposition: Disposition::Leave,
                dest_is_dir: false,
                dest: "/in/a.txt".into(),
                exist: Exist::Error,
                mode: Mode::Binary,
                checksum: Method::Md5,
                source_encoding: String::new(),
                dest_encoding: String::new(),
                dest_eol: String::new(),
            }],
        }
    }

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]
        /// A request message is whatever an application put on the command queue: a valid
        /// request cut, spliced or salted with markup, or any text at all, is read or refused
        /// with a reason, never a panic that would take the agent down.
        #[test]
        fn any_damaged_request_xml_is_read_or_refused(
            cut in 0usize..2000,
            at in 0usize..2000,
            insert in prop_oneof![
                prop::sample::select(vec![
                    "<", ">", "</item>", "<item>", "<item/>", "\"", "&", "&amp;", "&#0;",
                    "&#x110000;", "<!--", "<![CDATA[", "<?xml ?>", "<managedTransfer>",
                    "<transferSet>", "<item mode='text' checksumMethod='x'/>", "=", "'",
                ])
                .prop_map(str::to_string),
                ".{0,40}",
            ],
            whole in prop::option::of(".{0,200}"),
        ) {
            let text = match whole {
                Some(w) => w,
                None => {
                    let xml = sample().to_xml();
                    let mut b: Vec<char> = xml.chars().collect();
                    let at = at % (b.len() + 1);
                    b.splice(at..at, insert.chars());
                    let cut = cut % (b.len() + 1);
                    b[..cut].iter().chain(b[cut..].iter().skip(1)).collect::<String>()
                }
            };
            if let Err(e) = TransferRequest::from_xml(&text) {
                prop_assert!(!e.to_string().is_empty());
            }
        }
    }

    #[test]
    fn an_item_without_a_checksum_method_takes_the_default_it_is_read_with() {
        let mut req = TransferRequest {
            source_agent: "A1".into(),
            dest_agent: "B1".into(),
            items: vec![Item {
                source: "/data/f".into(),
                dest: "/in/f".into(),
                ..Item::default()
            }],
            ..TransferRequest::default()
        };
        req.items[0].checksum = Method::Md5;
        let xml = req.to_xml().replace(" checksumMethod=\"MD5\"", "");
        assert!(!xml.contains("checksumMethod"));
        let now = TransferRequest::from_xml(&xml).unwrap();
        assert_eq!(now.items[0].checksum, Method::Blake3);
        let old = TransferRequest::from_xml_with_default(&xml, Method::Sha256).unwrap();
        assert_eq!(old.items[0].checksum, Method::Sha256);
        // A method the request names wins over the default.
        let named = TransferRequest::from_xml_with_default(&req.to_xml(), Method::Sha256);
        assert_eq!(named.unwrap().items[0].checksum, Method::Md5);
        let blake = req.to_xml().replace("\"MD5\"", "\"blake3\"");
        let blake = TransferRequest::from_xml(&blake).unwrap();
        assert_eq!(blake.items[0].checksum, Method::Blake3);
    }
}
