//! Arbitrary text through `History::parse`. Fails on a panic; on a history
//! that parses but does not survive `to_json` -> `parse` unchanged; or when
//! `parse`, serde and `History::new` on the parsed messages disagree.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pikuri::History;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = History::parse(text);
    let via_serde = serde_json::from_str::<History>(text);
    assert_eq!(
        parsed.is_ok(),
        via_serde.is_ok(),
        "parse and serde disagree"
    );
    if let Ok(h) = parsed {
        let again = History::parse(&h.to_json()).expect("a parsed history round-trips");
        assert_eq!(again, h);
        let rebuilt = History::new(h.messages().to_vec()).expect("its messages are valid");
        assert_eq!(rebuilt, h);
    }
});
