//! Arbitrary JSON `[schema, arguments]` through `Parameters::from_json_schema`
//! and `validate`. Fails on a panic; on a rejection without a problem; or
//! when a compiled schema's own JSON does not compile again to the same
//! verdicts.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pikuri::tool::Parameters;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(Value::Array(mut pair)) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    if pair.len() != 2 {
        return;
    }
    let args = pair.pop().expect("two items");
    let schema = pair.pop().expect("two items");
    let Ok(params) = Parameters::from_json_schema(schema) else {
        return;
    };
    let verdict = params.validate(&args);
    if let Err(e) = &verdict {
        assert!(!e.problems().is_empty(), "a rejection names a problem");
        let _ = e.to_string();
    }
    let _ = params.strict_violations();
    let again = Parameters::from_json_schema(params.to_json().clone())
        .expect("a compiled schema's JSON compiles again");
    assert_eq!(again.validate(&args).is_ok(), verdict.is_ok());
});
