//! API tokens: `[[token]]` entries in the config hold a name, a role and the
//! SHA-256 of the secret (never the secret). `agentcron token create` makes
//! a secret, prints it once and appends its entry to the config file.
//!
//! Roles nest: `read` may call GET endpoints, `write` also everything that
//! changes something, `admin` everything (it is `write` plus what later
//! administrative endpoints will need).
//!
//! Secrets are 32 random bytes, so one SHA-256 is enough to store them
//! safely: there is nothing to guess that a slow hash would protect.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use serde::Deserialize;

use crate::UsageError;

/// What a token may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Role {
    /// GET endpoints.
    Read,
    /// Also creating, changing, deleting, triggering, cancelling.
    Write,
    /// Everything.
    Admin,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Write => "write",
            Role::Admin => "admin",
        }
    }
}

/// A `[[token]]` table.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TokenEntry {
    /// Who or what holds it (shown in logs).
    pub(crate) name: String,
    pub(crate) role: Role,
    /// `sha256:<64 hex digits>`.
    pub(crate) hash: String,
}

/// The prefix of every secret, so they are easy to spot (and to scan for).
const PREFIX: &str = "act_";

/// `sha256:<hex>` of a secret.
pub(crate) fn hash(secret: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, secret.as_bytes());
    let mut out = String::from("sha256:");
    for b in digest.as_ref() {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// A new secret: the prefix and 32 random bytes in hex.
fn generate() -> anyhow::Result<String> {
    use ring::rand::SecureRandom as _;
    let mut bytes = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| anyhow::anyhow!("the system's random source failed"))?;
    let mut secret = String::from(PREFIX);
    for b in bytes {
        let _ = write!(secret, "{b:02x}");
    }
    Ok(secret)
}

/// The configured tokens, by hash.
#[derive(Debug, Default)]
pub(crate) struct Tokens {
    by_hash: HashMap<String, (String, Role)>,
}

/// Why a request was refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No token, or one that is not configured (401).
    Unauthenticated(&'static str),
    /// A valid token without the role the endpoint needs (403).
    Forbidden {
        name: String,
        has: Role,
        needs: Role,
    },
}

impl Tokens {
    /// Checks the entries (names unique, hashes well formed and distinct).
    pub(crate) fn new(entries: &[TokenEntry]) -> anyhow::Result<Tokens> {
        let mut by_hash = HashMap::new();
        for e in entries {
            let hex = e.hash.strip_prefix("sha256:").unwrap_or_default();
            if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                bail!(UsageError(format!(
                    "token `{}`: hash must be sha256: and 64 hex digits (make one with `agentcron token create`)",
                    e.name
                )));
            }
            if by_hash.values().any(|(n, _): &(String, Role)| *n == e.name) {
                bail!(UsageError(format!(
                    "two tokens are named `{}`; names must be unique",
                    e.name
                )));
            }
            if by_hash
                .insert(e.hash.to_ascii_lowercase(), (e.name.clone(), e.role))
                .is_some()
            {
                bail!(UsageError(format!(
                    "token `{}` has the same hash as another token",
                    e.name
                )));
            }
        }
        Ok(Tokens { by_hash })
    }

    /// No tokens: the API is open (and bound to loopback only).
    pub(crate) fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }

    /// Who an `Authorization` header value is, if it may do what `needs` allows.
    pub(crate) fn check(&self, authorization: Option<&str>, needs: Role) -> Result<&str, Refusal> {
        let Some(value) = authorization else {
            return Err(Refusal::Unauthenticated(
                "this server needs an API token: send Authorization: Bearer <token>",
            ));
        };
        let Some(secret) = value
            .split_once(' ')
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, s)| s.trim())
        else {
            return Err(Refusal::Unauthenticated(
                "the Authorization header must be `Bearer <token>`",
            ));
        };
        let Some((name, has)) = self.by_hash.get(&hash(secret)) else {
            return Err(Refusal::Unauthenticated("the API token is not known here"));
        };
        if *has < needs {
            return Err(Refusal::Forbidden {
                name: name.clone(),
                has: *has,
                needs,
            });
        }
        Ok(name)
    }
}

impl Refusal {
    /// The sentence for the problem's detail.
    pub(crate) fn detail(&self) -> String {
        match self {
            Refusal::Unauthenticated(why) => (*why).to_string(),
            Refusal::Forbidden { name, has, needs } => format!(
                "token `{name}` has the {} role; this needs {}",
                has.as_str(),
                needs.as_str()
            ),
        }
    }
}

/// `agentcron token …`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum TokenCommand {
    /// Make a new API token: prints the secret once and adds its hash to the
    /// config file (restart the server to use it).
    Create {
        /// What it may do.
        #[arg(long, value_enum)]
        role: Role,
        /// Who holds it (default: `<role>-<n>`).
        #[arg(long)]
        name: Option<String>,
        /// The config file to add it to (default: $AGENTCRON_CONFIG, else ./agentcron.toml).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Print the `[[token]]` entry instead of writing it to a file.
        #[arg(long)]
        print_only: bool,
    },
}

/// The config file `token create` edits.
fn config_path(flag: Option<PathBuf>) -> PathBuf {
    flag.or_else(|| std::env::var_os("AGENTCRON_CONFIG").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("agentcron.toml"))
}

/// Names already taken in a config file's text.
fn taken_names(text: &str, path: &Path) -> anyhow::Result<Vec<String>> {
    #[derive(Deserialize)]
    struct Only {
        #[serde(default)]
        token: Vec<toml::Table>,
    }
    let only: Only = toml::from_str(text)
        .map_err(|e| UsageError(format!("{}: {}", path.display(), e.message().trim())))?;
    Ok(only
        .token
        .iter()
        .filter_map(|t| t.get("name").and_then(|n| n.as_str()).map(str::to_string))
        .collect())
}

pub(crate) fn run(cmd: TokenCommand, out: &mut impl std::io::Write) -> anyhow::Result<()> {
    let TokenCommand::Create {
        role,
        name,
        config,
        print_only,
    } = cmd;
    let secret = generate()?;
    let path = config_path(config);
    let existing = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let taken = taken_names(&existing, &path)?;
    let name = match name {
        Some(n) if taken.contains(&n) => {
            bail!(UsageError(format!(
                "{} already has a token named `{n}`",
                path.display()
            )))
        }
        Some(n) => n,
        None => (1..)
            .map(|i| format!("{}-{i}", role.as_str()))
            .find(|n| !taken.contains(n))
            .unwrap_or_default(),
    };
    let entry = format!(
        "[[token]]\nname = {}\nrole = \"{}\"\nhash = \"{}\"\n",
        // A JSON string is a valid TOML basic string.
        serde_json::Value::String(name.clone()),
        role.as_str(),
        hash(&secret)
    );
    if print_only {
        writeln!(out, "{secret}")?;
        writeln!(out, "\n# add to the config file:\n{entry}")?;
        return Ok(());
    }
    let mut text = existing;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    if !text.is_empty() {
        text.push('\n');
    }
    text.push_str(&entry);
    // Write beside the file and rename, so a crash leaves the old or the new.
    let tmp = path.with_extension("toml.tmp");
    std::fs::write(&tmp, &text).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("cannot replace {}", path.display()))?;
    writeln!(out, "{secret}")?;
    writeln!(
        out,
        "\nThat is token `{name}` ({} role); it is shown only this once.\n\
         Its hash is now in {}; restart the server to use it. Clients send it as\n\
         Authorization: Bearer <token> (the CLI reads AGENTCRON_TOKEN).",
        role.as_str(),
        path.display()
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens() -> Tokens {
        Tokens::new(&[
            TokenEntry {
                name: "reader".into(),
                role: Role::Read,
                hash: hash("act_r"),
            },
            TokenEntry {
                name: "writer".into(),
                role: Role::Write,
                hash: hash("act_w"),
            },
        ])
        .expect("valid")
    }

    #[test]
    fn roles_nest_and_refusals_say_why() {
        let t = tokens();
        assert_eq!(t.check(Some("Bearer act_r"), Role::Read), Ok("reader"));
        assert_eq!(t.check(Some("bearer  act_w"), Role::Read), Ok("writer"));
        assert_eq!(t.check(Some("Bearer act_w"), Role::Write), Ok("writer"));
        let refused = t.check(Some("Bearer act_r"), Role::Write).unwrap_err();
        assert_eq!(
            refused.detail(),
            "token `reader` has the read role; this needs write"
        );
        assert!(matches!(
            t.check(None, Role::Read),
            Err(Refusal::Unauthenticated(_))
        ));
        assert!(matches!(
            t.check(Some("Basic act_r"), Role::Read),
            Err(Refusal::Unauthenticated(_))
        ));
        assert!(matches!(
            t.check(Some("Bearer act_x"), Role::Read),
            Err(Refusal::Unauthenticated(_))
        ));
    }

    #[test]
    fn bad_entries_are_refused() {
        let entry = |name: &str, hash: &str| TokenEntry {
            name: name.into(),
            role: Role::Read,
            hash: hash.into(),
        };
        assert!(Tokens::new(&[entry("a", "md5:00")]).is_err());
        let h = hash("x");
        assert!(Tokens::new(&[entry("a", &h), entry("a", &hash("y"))]).is_err());
        assert!(Tokens::new(&[entry("a", &h), entry("b", &h)]).is_err());
    }

    #[test]
    fn create_appends_an_entry_that_loads() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("agentcron.toml");
        std::fs::write(&path, "workers = 4 # keep this comment").expect("write");
        let mut out = Vec::new();
        let cmd = |name: Option<&str>| TokenCommand::Create {
            role: Role::Write,
            name: name.map(str::to_string),
            config: Some(path.clone()),
            print_only: false,
        };
        run(cmd(None), &mut out).expect("create");
        let secret = String::from_utf8(out).expect("utf-8");
        let secret = secret.lines().next().expect("a line");
        assert!(secret.starts_with("act_") && secret.len() == 68, "{secret}");
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(
            text.starts_with("workers = 4 # keep this comment\n"),
            "{text}"
        );
        let err = run(cmd(Some("write-1")), &mut Vec::new()).unwrap_err();
        assert!(
            err.to_string()
                .contains("already has a token named `write-1`")
        );
        run(cmd(None), &mut Vec::new()).expect("second");

        #[derive(Deserialize)]
        struct File {
            token: Vec<TokenEntry>,
        }
        let file: File = toml::from_str(&std::fs::read_to_string(&path).expect("read"))
            .expect("still valid TOML");
        let names: Vec<_> = file.token.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["write-1", "write-2"]);
        let tokens = Tokens::new(&file.token).expect("loads");
        assert_eq!(
            tokens.check(Some(&format!("Bearer {secret}")), Role::Write),
            Ok("write-1")
        );
    }
}
