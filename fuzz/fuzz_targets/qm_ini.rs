//! Feeds arbitrary text to the qm.ini parser and `QmConfig::from_ini`, as a hand-edited file
//! would: nothing may panic, a parsed file written back parses to the same stanzas, and a
//! configuration that is accepted can be asked everything the queue manager asks of it.
#![no_main]

use ferrymq_server::config::{error_log_settings, unknown_keys, Ini, QmConfig};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, data)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(data);
    if mode & 1 == 1 {
        set(&text);
        return;
    }
    let Ok(ini) = Ini::parse(&text) else {
        return;
    };
    ini.check_writable().expect("what was read can be written");
    let written = ini.to_string();
    let again = Ini::parse(&written).expect("a written qm.ini parses");
    assert_eq!(again, ini, "{written:?}");
    assert_eq!(again.to_string(), written);
    let _ = unknown_keys(&ini);
    let _ = error_log_settings(&ini);
    let Ok(cfg) = QmConfig::from_ini(&ini) else {
        return;
    };
    if let Some(ha) = &cfg.ha {
        let me = ha.local_id();
        assert_eq!(ha.name_of(me), ha.local);
        let _ = (ha.local_addr(), ha.bind_addr());
        for (name, _) in &ha.instances {
            assert!(ha.node_id(name).is_some());
        }
    }
});

/// `stanza NUL key NUL value NUL file`: the key set in the file as `setmqini` and the `DR`
/// commands set one. What saving accepts must read back as what was set.
fn set(text: &str) {
    let mut parts = text.splitn(4, '\0');
    let (Some(stanza), Some(key), Some(value)) = (parts.next(), parts.next(), parts.next()) else {
        return;
    };
    let mut ini = Ini::parse(parts.next().unwrap_or("")).unwrap_or_default();
    ini.set(stanza, key, value);
    if ini.check_writable().is_err() {
        return;
    }
    let written = ini.to_string();
    assert_eq!(Ini::parse(&written).as_ref(), Ok(&ini), "{written:?}");
}
