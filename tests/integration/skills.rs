//! Issue 40, part 3: Agent Skills read on demand. A folder of three skills
//! behind the `Skills` extension, on the strict scripted server: the block
//! in the system prompt, the body and a file read only when the model asks,
//! and traversal, links, huge files, special files and broken front matter
//! refused with clear errors (the turn goes on; the next turn works).

use std::fs;
use std::path::{Path, PathBuf};

use pikuri::skill::{Catalog, Skill, Skills};
use pikuri::subagent::{Persona, SubAgents};
use pikuri::testing::{FakeServer, Reply};
use pikuri::{Agent, ErrorKind, Role};
use serde_json::json;

use crate::util::assert_valid_history;

/// A fresh folder under the temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "pikuri-skills-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn skill_md(name: &str, description: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n{body}\n")
}

/// Three skills: `release-notes` (with a reference file), `sql-review` and
/// `travel-plans` (with metadata and allowed tools).
fn three_skills() -> TempDir {
    let t = TempDir::new("three");
    let root = &t.0;
    write(
        &root.join("release-notes/SKILL.md"),
        &skill_md(
            "release-notes",
            "Writes release notes from a changelog.",
            "Group the changes by kind. See references/style.md.",
        ),
    );
    write(
        &root.join("release-notes/references/style.md"),
        "One line per change, past tense.",
    );
    write(
        &root.join("sql-review/SKILL.md"),
        &skill_md(
            "sql-review",
            "Reviews SQL queries for injection and speed.",
            "Check every WHERE.",
        ),
    );
    write(
        &root.join("travel-plans/SKILL.md"),
        "---\nname: travel-plans\ndescription: >\n  Plans trips:\n  trains first.\nlicense: MIT\n\
         metadata:\n  author: pikuri\nallowed-tools: web_search fetch\n---\nPrefer trains.\n",
    );
    t
}

/// An agent on `server` with the `Skills` extension of `catalog`.
fn skills_agent(server: &FakeServer, catalog: Catalog) -> Agent {
    Agent::builder(server.transport())
        .add_extension(Skills::new(catalog))
        .build()
        .unwrap()
}

/// The history is valid and the next turn gets the scripted `next`.
fn assert_next_turn_works(agent: &mut Agent) {
    assert_valid_history(agent.messages());
    assert_eq!(
        agent.run_loop("again").unwrap().answer.as_deref(),
        Some("next")
    );
}

fn tool_results(agent: &Agent) -> Vec<String> {
    agent
        .messages()
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.clone())
        .collect()
}

#[test]
fn a_catalog_of_three_skills_reads_the_front_matter_only() {
    let t = three_skills();
    let catalog = Catalog::discover(&[&t.0]).unwrap();
    assert_eq!(
        catalog.names(),
        ["release-notes", "sql-review", "travel-plans"]
    );
    assert!(catalog.rejected().is_empty(), "{:?}", catalog.rejected());
    let travel = catalog.get("travel-plans").unwrap();
    assert_eq!(travel.description(), "Plans trips: trains first.");
    assert_eq!(travel.license(), Some("MIT"));
    assert_eq!(travel.metadata()["author"], "pikuri");
    assert_eq!(travel.allowed_tools(), ["web_search", "fetch"]);
    // One skill folder given as a root is that skill.
    let one = Catalog::discover(&[t.0.join("sql-review")]).unwrap();
    assert_eq!(one.names(), ["sql-review"]);
    assert_eq!(
        Skill::load(t.0.join("sql-review")).unwrap().name(),
        "sql-review"
    );
}

#[test]
fn the_model_reads_a_skill_and_its_file_on_demand_and_the_next_turn_works() {
    let t = three_skills();
    let server = FakeServer::start();
    server.set_strict(true);
    server.push(Reply::tool_call("skill", json!({"name": "release-notes"})));
    server.push(Reply::tool_call(
        "skill",
        json!({"name": "release-notes", "path": "references/style.md"}),
    ));
    server.push(Reply::text("Notes written."));
    server.push(Reply::text("Second turn."));
    let catalog = Catalog::discover(&[&t.0]).unwrap();
    let mut agent = Agent::builder(server.transport())
        .system_prompt("You help.")
        .add_extension(Skills::new(catalog))
        .build()
        .unwrap();
    let out = agent.run_loop("Write the release notes.").unwrap();
    assert_eq!(out.answer.as_deref(), Some("Notes written."));

    let reqs = server.chat_requests();
    // Every request carries the names and descriptions, never a body.
    let system = reqs[0].system().unwrap();
    assert!(system.starts_with("You help."), "{system}");
    assert!(system.contains("<available_skills>"));
    assert!(system.contains("- sql-review: Reviews SQL queries for injection and speed."));
    assert!(system.contains("- travel-plans: Plans trips: trains first."));
    assert!(
        !system.contains("Group the changes"),
        "bodies stay out of the prompt"
    );
    assert_eq!(reqs[0].tool_names(), ["skill"]);

    let results = tool_results(&agent);
    assert!(
        results[0].starts_with("# Skill: release-notes"),
        "{}",
        results[0]
    );
    assert!(results[0].contains("Group the changes by kind."));
    assert!(
        results[0].contains("- references/style.md (32 bytes)"),
        "{}",
        results[0]
    );
    assert!(
        !results[0].contains("name: release-notes"),
        "no front matter in the body"
    );
    assert_eq!(results[1], "One line per change, past tense.");

    agent.run_loop("again").unwrap();
    assert_valid_history(agent.messages());
}

/// One call of the skill tool with `args`; the tool's observation.
fn observe(root: &Path, args: serde_json::Value) -> String {
    let server = FakeServer::start();
    server.push(Reply::tool_call("skill", args));
    server.push(Reply::text("ok"));
    let catalog = Catalog::discover(&[root]).unwrap();
    let mut agent = Agent::builder(server.transport())
        .add_extension(Skills::new(catalog).with_max_bytes(1024))
        .build()
        .unwrap();
    agent.run_loop("go").unwrap();
    assert_valid_history(agent.messages());
    tool_results(&agent).remove(0)
}

/// ATTACKS.md, "Files and stores": every spelling of a way out of the
/// skill's folder (dotted, absolute, encoded, backslashed, doubled
/// slashes, a NUL) is refused or names no file, and never reads what lies
/// outside.
#[test]
fn reads_stay_inside_the_skill_folder() {
    let t = three_skills();
    write(&t.0.join("secret.txt"), "TOP SECRET");
    write(&t.0.join("release-notes/..%2fsecret.txt"), "decoy");
    let cases = [
        ("../secret.txt", "`..` is not allowed"),
        ("references/../../secret.txt", "`..` is not allowed"),
        ("./../secret.txt", "`..` is not allowed"),
        ("references/./../../secret.txt", "`..` is not allowed"),
        ("/etc/passwd", "absolute path"),
        ("//etc/passwd", "absolute path"),
        ("missing.md", "no such file"),
        ("references", "not a regular file"),
        ("%2e%2e/secret.txt", "no such file"),
        ("%2E%2E%2Fsecret.txt", "no such file"),
        ("..\\secret.txt", "no such file"),
        ("references\\..\\..\\secret.txt", "no such file"),
        ("secret.txt\0", "NUL byte"),
        // A file whose name only looks like a way out is inside: read.
        ("..%2fsecret.txt", "decoy"),
    ];
    for (path, expected) in cases {
        let seen = observe(&t.0, json!({"name": "release-notes", "path": path}));
        assert!(seen.contains(expected), "{path:?}: {seen}");
        assert!(!seen.contains("TOP SECRET"), "{path:?}: {seen}");
    }
    let unknown = observe(&t.0, json!({"name": "nope"}));
    assert!(!unknown.contains("Group the changes"), "{unknown}");
}

#[cfg(unix)]
#[test]
fn links_out_special_files_huge_and_binary_files_are_refused() {
    let t = three_skills();
    let skill = t.0.join("release-notes");
    write(&t.0.join("outside.txt"), "OUTSIDE");
    std::os::unix::fs::symlink(t.0.join("outside.txt"), skill.join("out.md")).unwrap();
    std::os::unix::fs::symlink("/etc", skill.join("etc")).unwrap();
    // A link that stays inside is read.
    std::os::unix::fs::symlink("references/style.md", skill.join("style-link.md")).unwrap();
    write(&skill.join("huge.md"), &"x".repeat(5000));
    fs::write(skill.join("blob.bin"), [0xff, 0xfe, 0x00, 0x80]).unwrap();
    let fifo = skill.join("pipe");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    let cases = [
        ("out.md", "leads out of the skill's folder"),
        ("etc/passwd", "leads out of the skill's folder"),
        ("huge.md", "5000 bytes, more than the 1024 read"),
        ("blob.bin", "not UTF-8 text"),
        ("style-link.md", "One line per change"),
    ];
    for (path, expected) in cases {
        let seen = observe(&t.0, json!({"name": "release-notes", "path": path}));
        assert!(seen.contains(expected), "{path}: {seen}");
        assert!(
            !seen.contains("OUTSIDE") && !seen.contains("root:"),
            "{path}: {seen}"
        );
    }
    if made.is_ok_and(|s| s.success()) {
        // A FIFO would block a reader for ever: refused before opening.
        let seen = observe(&t.0, json!({"name": "release-notes", "path": "pipe"}));
        assert!(seen.contains("not a regular file"), "{seen}");
    }
    // The listing names the regular files only, and follows no link.
    let listing = observe(&t.0, json!({"name": "release-notes"}));
    assert!(listing.contains("huge.md (5000 bytes)"), "{listing}");
    assert!(
        !listing.contains("out.md") && !listing.contains("passwd"),
        "{listing}"
    );
    // A skill folder that is a link out of the root is not discovered.
    let other = TempDir::new("linked");
    write(
        &other.0.join("linked/SKILL.md"),
        &skill_md("linked", "Lives elsewhere.", "x"),
    );
    std::os::unix::fs::symlink(other.0.join("linked"), t.0.join("linked")).unwrap();
    let catalog = Catalog::discover(&[&t.0]).unwrap();
    assert!(catalog.get("linked").is_none());
}

#[test]
fn broken_skills_are_left_out_with_the_file_and_line() {
    let t = three_skills();
    let broken = [
        ("no-front", "just text\n", "starts with a `---` line"),
        ("unclosed", "---\nname: unclosed\n", "no closing `---`"),
        (
            "twice",
            "---\nname: twice\nname: twice\n---\n",
            "line 3: `name` is given twice",
        ),
        ("no-desc", "---\nname: no-desc\n---\n", "no `description`"),
        (
            "wrong-name",
            "---\nname: other\ndescription: d\n---\n",
            "not the folder's name",
        ),
        (
            "Bad_Name",
            "---\nname: Bad_Name\ndescription: d\n---\n",
            "lowercase letters",
        ),
        (
            "tabbed",
            "---\nname: tabbed\n\tdescription: d\n---\n",
            "line 3: a tab",
        ),
    ];
    for (dir, text, _) in broken {
        write(&t.0.join(dir).join("SKILL.md"), text);
    }
    let long = format!(
        "---\nname: long-desc\ndescription: {}\n---\n",
        "d".repeat(1025)
    );
    write(&t.0.join("long-desc/SKILL.md"), &long);
    fs::write(t.0.join("binary/SKILL.md").tap_dir(), [0xff, 0x00]).unwrap();
    let catalog = Catalog::discover(&[&t.0]).unwrap();
    assert_eq!(
        catalog.names(),
        ["release-notes", "sql-review", "travel-plans"]
    );
    let rejected = catalog.rejected();
    assert_eq!(rejected.len(), broken.len() + 2, "{rejected:?}");
    for (dir, _, expected) in broken {
        let (path, reason) = rejected.iter().find(|(p, _)| p.ends_with(dir)).unwrap();
        assert!(reason.contains(expected), "{dir}: {reason}");
        assert!(
            reason.contains(&path.join("SKILL.md").display().to_string()),
            "{reason}"
        );
    }
    let reason = |dir: &str| &rejected.iter().find(|(p, _)| p.ends_with(dir)).unwrap().1;
    assert!(reason("long-desc").contains("longer than 1024"));
    assert!(reason("binary").contains("not UTF-8"));
    // Loading one directly is the same error, typed.
    let e = Skill::load(t.0.join("twice")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    assert!(e.to_string().contains("line 3"), "{e}");
    // A root that is not a folder is an error, not an empty catalog.
    let e = Catalog::discover(&[t.0.join("missing")]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
}

/// `fs::write` to a file whose folder may not exist yet.
trait TapDir {
    fn tap_dir(self) -> Self;
}

impl TapDir for PathBuf {
    fn tap_dir(self) -> PathBuf {
        fs::create_dir_all(self.parent().unwrap()).unwrap();
        self
    }
}

#[test]
fn a_huge_skill_file_and_a_huge_front_matter_are_refused_not_read() {
    let t = TempDir::new("huge");
    let mut big = skill_md("big", "Big.", "");
    big.push_str(&"x".repeat(2 * 1024 * 1024));
    write(&t.0.join("big/SKILL.md"), &big);
    let front = format!(
        "---\nname: wide\ndescription: {}\n---\n",
        "w".repeat(70 * 1024)
    );
    write(&t.0.join("wide/SKILL.md"), &front);
    let catalog = Catalog::discover(&[&t.0]).unwrap();
    assert!(catalog.is_empty());
    let reasons: Vec<&str> = catalog.rejected().iter().map(|(_, r)| r.as_str()).collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("more than the 1048576 read")),
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r.contains("longer than")),
        "{reasons:?}"
    );
}

#[test]
fn an_empty_catalog_adds_no_tool_and_no_block() {
    let server = FakeServer::start();
    server.push(Reply::text("hi"));
    let mut agent = Agent::builder(server.transport())
        .system_prompt("Base.")
        .add_extension(Skills::new(Catalog::new()))
        .build()
        .unwrap();
    assert_eq!(agent.system_prompt(), "Base.");
    agent.run_loop("hi").unwrap();
    assert!(server.chat_requests()[0].tool_names().is_empty());
    assert!(Catalog::new().tool("skill").is_err());
    let e = Agent::builder(server.transport())
        .add_extension(Skills::new(Catalog::new()).with_tool_name("bad name"))
        .build()
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
}

#[test]
fn a_sub_agent_gets_a_subset_of_the_skills() {
    let t = three_skills();
    let catalog = Catalog::discover(&[&t.0]).unwrap();
    let sql = catalog.subset(&["sql-review"]).unwrap();
    assert!(catalog.subset(&["nope"]).is_err());
    let server = FakeServer::start();
    // Parent delegates; the child reads its one skill and answers.
    server.push(Reply::tool_call(
        "agent",
        json!({"name": "reviewer", "task": "Review it."}),
    ));
    server.push(Reply::tool_call("sql_skill", json!({"name": "sql-review"})));
    server.push(Reply::text("Looks safe."));
    server.push(Reply::text("The reviewer says it looks safe."));
    let persona = Persona::new(
        "reviewer",
        "Reviews SQL.",
        format!("You review SQL.\n{}", sql.snippet("sql_skill")),
        5,
    )
    .with_tools(&["sql_skill"]);
    let mut agent = Agent::builder(server.transport())
        .add_extension(Skills::new(catalog))
        .add_sub_agent_tool(sql.tool("sql_skill").unwrap())
        .add_extension(SubAgents::new(vec![persona]).unwrap())
        .build()
        .unwrap();
    agent.run_loop("Review my query.").unwrap();
    let reqs = server.chat_requests();
    let child = &reqs[1];
    let system = child.system().unwrap();
    assert!(system.contains("- sql-review: Reviews SQL"), "{system}");
    assert!(!system.contains("release-notes"), "{system}");
    assert_eq!(child.tool_names(), ["sql_skill"]);
    // The child's tool reads its own subset only: its schema names one skill.
    let body = child.body.as_ref().unwrap();
    let names = &body["tools"][0]["function"]["parameters"]["properties"]["name"]["enum"];
    assert_eq!(names, &json!(["sql-review"]));
    // The parent still lists all three.
    assert!(reqs[0].system().unwrap().contains("travel-plans"));
}

/// A link loop in a skill's folder is an error the model reads, and the
/// listing (which follows no link) still ends.
#[cfg(unix)]
#[test]
fn symlink_loops_end_in_an_error_not_a_hang() {
    let t = three_skills();
    let skill = t.0.join("release-notes");
    std::os::unix::fs::symlink(skill.join("loop-b"), skill.join("loop-a")).unwrap();
    std::os::unix::fs::symlink(skill.join("loop-a"), skill.join("loop-b")).unwrap();
    // A folder that links to its own parent: a cycle for a walker that
    // followed links.
    std::os::unix::fs::symlink(".", skill.join("again")).unwrap();
    let seen = observe(&t.0, json!({"name": "release-notes", "path": "loop-a"}));
    assert!(seen.contains("symbolic links"), "{seen}");
    let deep = "again/".repeat(30) + "references/style.md";
    let seen = observe(&t.0, json!({"name": "release-notes", "path": deep}));
    assert!(seen.contains("One line per change"), "{seen}");
    let listing = observe(&t.0, json!({"name": "release-notes"}));
    assert!(listing.contains("references/style.md"), "{listing}");
    assert!(!listing.contains("again"), "{listing}");
    // A skills root that is a loop is an error, not a hang.
    let root = TempDir::new("rootloop");
    std::os::unix::fs::symlink(root.0.join("b"), root.0.join("a")).unwrap();
    std::os::unix::fs::symlink(root.0.join("a"), root.0.join("b")).unwrap();
    let e = Catalog::discover(&[root.0.join("a")]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
}

/// A `SKILL.md` that is (or becomes, after discovery) a link out of its
/// folder is not read: neither when the catalog is built nor when the
/// model asks for the skill's body.
#[cfg(unix)]
#[test]
fn a_skill_md_linked_out_of_its_folder_is_not_read() {
    let t = three_skills();
    let outside = TempDir::new("outside");
    write(
        &outside.0.join("SKILL.md"),
        &skill_md("release-notes", "Looks like one.", "OUTSIDE SECRET"),
    );
    // At discovery.
    let linked = t.0.join("linked-out");
    fs::create_dir_all(&linked).unwrap();
    write(
        &outside.0.join("other/SKILL.md"),
        &skill_md("linked-out", "Lives elsewhere.", "OUTSIDE SECRET"),
    );
    std::os::unix::fs::symlink(outside.0.join("other/SKILL.md"), linked.join("SKILL.md")).unwrap();
    let catalog = Catalog::discover(&[&t.0]).unwrap();
    assert!(catalog.get("linked-out").is_none());
    let (_, reason) = catalog
        .rejected()
        .iter()
        .find(|(p, _)| p.ends_with("linked-out"))
        .expect("refused");
    assert!(
        reason.contains("leads out of the skill's folder"),
        "{reason}"
    );
    // After discovery: the file is swapped for a link between the
    // catalog and the call.
    let server = FakeServer::start();
    server.push(Reply::tool_call("skill", json!({"name": "release-notes"})));
    server.push(Reply::text("ok"));
    server.push(Reply::text("next"));
    let mut agent = skills_agent(&server, catalog);
    let md = t.0.join("release-notes/SKILL.md");
    fs::remove_file(&md).unwrap();
    std::os::unix::fs::symlink(outside.0.join("SKILL.md"), &md).unwrap();
    agent.run_loop("notes").unwrap();
    let seen = tool_results(&agent).remove(0);
    assert!(seen.contains("leads out of the skill's folder"), "{seen}");
    assert!(!seen.contains("OUTSIDE SECRET"), "{seen}");
    assert_next_turn_works(&mut agent);
}

/// A skill folder removed between the catalog and the call is an error the
/// model reads; two skills of one name keep the first; a name that differs
/// from its folder is refused.
#[test]
fn a_removed_skill_a_repeated_name_and_a_foreign_name() {
    let t = three_skills();
    let other = TempDir::new("second-root");
    write(
        &other.0.join("sql-review/SKILL.md"),
        &skill_md("sql-review", "The second one.", "SECOND"),
    );
    write(
        &other.0.join("renamed/SKILL.md"),
        &skill_md("sql-review", "Under another folder.", "THIRD"),
    );
    let catalog = Catalog::discover(&[&t.0, &other.0]).unwrap();
    assert_eq!(
        catalog.get("sql-review").unwrap().description(),
        "Reviews SQL queries for injection and speed."
    );
    let reason = |dir: &str| {
        catalog
            .rejected()
            .iter()
            .find(|(p, _)| p.ends_with(dir))
            .map(|(_, r)| r.clone())
            .unwrap_or_default()
    };
    assert!(
        reason("sql-review").contains("was found first"),
        "{:?}",
        catalog.rejected()
    );
    assert!(
        reason("renamed").contains("not the folder's name"),
        "{:?}",
        catalog.rejected()
    );

    let server = FakeServer::start();
    server.push(Reply::tool_call("skill", json!({"name": "travel-plans"})));
    server.push(Reply::tool_call(
        "skill",
        json!({"name": "travel-plans", "path": "x.md"}),
    ));
    server.push(Reply::text("gone"));
    server.push(Reply::text("next"));
    let mut agent = skills_agent(&server, catalog);
    fs::remove_dir_all(t.0.join("travel-plans")).unwrap();
    agent.run_loop("plan").unwrap();
    let seen = tool_results(&agent);
    assert_eq!(seen.len(), 2);
    for s in &seen {
        assert!(
            s.contains("No such file") || s.contains("no such file"),
            "{s}"
        );
        assert!(s.chars().count() < 400, "{s}");
    }
    assert_next_turn_works(&mut agent);
}

/// Thousands of skills: the catalog holds `MAX_SKILLS`, and the block in
/// every request stays under its cap however long the descriptions are
/// (the tool's `name` still names every skill).
#[test]
fn thousands_of_skills_keep_the_prompt_bounded() {
    use pikuri::skill::MAX_SKILLS;
    let t = TempDir::new("many");
    let long = "d".repeat(1000);
    for i in 0..MAX_SKILLS + 5 {
        let name = format!("skill-{i:04}");
        write(
            &t.0.join(&name).join("SKILL.md"),
            &skill_md(&name, &format!("{long} {i}"), "body"),
        );
    }
    let (catalog, logs) = crate::security::capture_logs(|| Catalog::discover(&[&t.0]).unwrap());
    assert_eq!(catalog.len(), MAX_SKILLS);
    assert_eq!(catalog.rejected().len(), 5);
    assert!(catalog.rejected()[0].1.contains("more than 1000 skills"));
    // One log line for the folders past the cap, not one per folder.
    let over: Vec<&String> = logs
        .iter()
        .filter(|l| l.contains("more than 1000 skills"))
        .collect();
    assert_eq!(over.len(), 1, "{over:?}");
    assert!(over[0].contains("5 skill folders left out"), "{over:?}");
    let block = catalog.snippet("skill");
    assert!(block.len() <= 32 * 1024, "{} bytes", block.len());
    assert!(block.contains("- skill-0000: ddd"), "{}", &block[..300]);
    assert!(block.ends_with("</available_skills>"), "{block}");
    let listed = block.lines().filter(|l| l.starts_with("- skill-")).count();
    assert!(
        block.contains(&format!("{} more skills", MAX_SKILLS - listed)),
        "{}",
        &block[block.len() - 400..]
    );

    let server = FakeServer::start();
    server.push(Reply::tool_call("skill", json!({"name": "skill-0999"})));
    server.push(Reply::text("read"));
    let mut agent = skills_agent(&server, catalog);
    assert!(agent.system_prompt().len() <= 33 * 1024);
    agent.run_loop("go").unwrap();
    // A skill past the listed ones is still read by name.
    assert!(tool_results(&agent)[0].contains("# Skill: skill-0999"));
}

/// A `SKILL.md` written on Windows (a byte-order mark, CRLF line ends) is
/// read as the same skill, its body without stray `\r`s; a control
/// character in the description is refused.
#[test]
fn a_windows_skill_md_reads_the_same_and_control_bytes_are_refused() {
    let t = TempDir::new("windows");
    write(
        &t.0.join("crlf/SKILL.md"),
        "\u{feff}---\r\nname: crlf\r\ndescription: Written on Windows.\r\n---\r\nLine one.\r\nLine two.\r\n",
    );
    write(
        &t.0.join("nul/SKILL.md"),
        "---\nname: nul\ndescription: has a \0 in it\n---\nbody\n",
    );
    let catalog = Catalog::discover(&[&t.0]).unwrap();
    assert_eq!(
        catalog.get("crlf").unwrap().description(),
        "Written on Windows."
    );
    let seen = observe(&t.0, json!({"name": "crlf"}));
    assert!(seen.contains("Line one.\nLine two."), "{seen:?}");
    assert!(!seen.contains('\r'), "{seen:?}");
    // A NUL (or an escape) in a description would reach every request's
    // system prompt: the skill is left out, saying why.
    assert!(catalog.get("nul").is_none());
    let (_, reason) = &catalog.rejected()[0];
    assert!(reason.contains("control character (U+0000)"), "{reason}");
    assert!(!catalog.snippet("skill").contains('\0'));
}
