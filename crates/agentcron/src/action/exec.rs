//! The `exec` action: run a program (argv, no shell) with extra environment
//! and working directory; the attempt's context arrives as JSON on stdin.
//! Exit 0 is success; stdout becomes the result (JSON if it parses) and
//! stdout/stderr are kept as output, each capped. The program runs in its own
//! process group, and if the attempt is abandoned (timeout, cancel, lost
//! lease) the whole group is killed — children it started included.
//!
//! Off unless the node's configuration enables it.

use std::collections::BTreeMap;
use std::process::Stdio;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use super::{ActionError, Attempt, Done};

pub(crate) async fn run(
    command: &[String],
    env: &BTreeMap<String, String>,
    cwd: Option<&str>,
    attempt: &Attempt,
    cap: usize,
) -> Result<Done, ActionError> {
    let Some((program, args)) = command.split_first() else {
        return Err(ActionError::permanent("exec action has an empty command"));
    };
    let mut cmd = Command::new(program);
    cmd.args(args)
        .envs(env)
        .env("AGENTCRON_RUN_ID", attempt.run_id.to_string())
        .env("AGENTCRON_TASK_ID", attempt.task_id.to_string())
        .env("AGENTCRON_TASK_NAME", &attempt.task_name)
        .env("AGENTCRON_ATTEMPT", attempt.attempt.to_string())
        .env("AGENTCRON_FENCE", attempt.fence.to_string())
        .env("AGENTCRON_SCHEDULED_FOR", attempt.scheduled_for.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    #[cfg(unix)]
    cmd.process_group(0);
    let mut child = cmd
        .spawn()
        .map_err(|e| ActionError::permanent(format!("cannot start `{program}`: {e}")))?;
    let guard = GroupGuard::new(child.id());

    let input = serde_json::json!({
        "run": {"id": attempt.run_id.to_string(), "attempt": attempt.attempt, "fence": attempt.fence,
                "scheduled_for": attempt.scheduled_for.to_string(), "trigger": attempt.trigger.as_str()},
        "task": {"id": attempt.task_id.to_string(), "name": attempt.task_name},
        "payload": attempt.payload,
    });
    let stdin = child.stdin.take();
    let feed = async move {
        if let Some(mut stdin) = stdin {
            // A program that does not read stdin closes it: not an error.
            let _ = stdin.write_all(input.to_string().as_bytes()).await;
        }
    };
    let stdout = read_capped(child.stdout.take(), cap);
    let stderr = read_capped(child.stderr.take(), cap);
    let ((), out, err, status) = tokio::join!(feed, stdout, stderr, child.wait());
    let status = status
        .map_err(|e| ActionError::retryable(format!("waiting for `{program}` failed: {e}")))?;
    guard.disarm();
    let output = format_output(&out, &err);
    if status.success() {
        let text = String::from_utf8_lossy(&out);
        let result = serde_json::from_str(text.trim())
            .unwrap_or_else(|_| serde_json::Value::String(text.into_owned()));
        return Ok(Done {
            result: Some(result),
            output: Some(output),
        });
    }
    let tail: String = {
        let e = String::from_utf8_lossy(&err);
        let chars: Vec<char> = e.trim_end().chars().collect();
        chars[chars.len().saturating_sub(500)..].iter().collect()
    };
    let why = match status.code() {
        Some(code) => format!("`{program}` exited with status {code}"),
        None => format!("`{program}` was killed by a signal"),
    };
    Err(ActionError::retryable(if tail.is_empty() {
        why
    } else {
        format!("{why}: {tail}")
    }))
}

/// Reads a pipe to its end, keeping at most `cap` bytes.
async fn read_capped(pipe: Option<impl AsyncRead + Unpin>, cap: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    let Some(mut pipe) = pipe else { return kept };
    let mut buf = [0u8; 8192];
    // Keep reading past the cap so the program never blocks on a full pipe.
    while let Ok(n) = pipe.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let room = cap.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
    }
    kept
}

fn format_output(out: &[u8], err: &[u8]) -> String {
    let mut text = String::from_utf8_lossy(out).into_owned();
    if !err.is_empty() {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str("--- stderr ---\n");
        text.push_str(&String::from_utf8_lossy(err));
    }
    text
}

/// Kills the child's whole process group when dropped before `disarm`.
struct GroupGuard {
    pgid: Option<u32>,
}

impl GroupGuard {
    fn new(pid: Option<u32>) -> Self {
        GroupGuard { pgid: pid }
    }

    fn disarm(mut self) {
        self.pgid = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(pgid) = self
            .pgid
            .and_then(|p| i32::try_from(p).ok())
            .and_then(rustix::process::Pid::from_raw)
        {
            // The group leader is our child (process_group(0)); ESRCH means it is gone already.
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
        }
    }
}
