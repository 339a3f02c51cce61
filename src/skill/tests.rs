use std::path::Path;

use super::check_name;

#[test]
fn names_the_format_allows() {
    let dir = |n: &str| Path::new("/skills").join(n);
    for good in ["a", "pdf-tools", "x1-2", &"a".repeat(64)] {
        assert_eq!(check_name(good, &dir(good)), Ok(()), "{good}");
    }
    for bad in [
        "",
        "-a",
        "a-",
        "a--b",
        "A",
        "a_b",
        "a b",
        "é",
        &"a".repeat(65),
    ] {
        assert!(check_name(bad, &dir(bad)).is_err(), "{bad:?}");
    }
    let e = check_name("pdf", &dir("pdf-tools")).unwrap_err();
    assert!(e.contains("folder's name \"pdf-tools\""), "{e}");
}

#[test]
fn the_confinement_refuses_before_touching_the_disk() {
    let dir = Path::new("/nonexistent-skill-dir");
    assert!(
        super::read::confined(dir, "/etc/passwd")
            .unwrap_err()
            .contains("absolute")
    );
    assert!(
        super::read::confined(dir, "a/../../b")
            .unwrap_err()
            .contains("`..`")
    );
}
