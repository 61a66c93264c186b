//! Templates in action payloads (minijinja): every string in a JSON body may
//! use `{{ task.name }}`, `{{ run.scheduled_for }}`, `{{ payload.x }}` …
//! Only string leaves are rendered, so the body stays valid JSON whatever a
//! value contains. Unknown variables are errors, not empty strings.

use minijinja::{Environment, UndefinedBehavior};

use super::{ActionError, Attempt};

/// Renders every string leaf of `value` that contains template syntax.
pub(crate) fn render_json(
    value: &serde_json::Value,
    attempt: &Attempt,
) -> Result<serde_json::Value, ActionError> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    let ctx = minijinja::Value::from(minijinja::value::Serde(context(attempt)));
    render(&env, value, &ctx)
}

/// The variables a template sees.
fn context(a: &Attempt) -> serde_json::Value {
    serde_json::json!({
        "task": {"id": a.task_id.to_string(), "name": a.task_name, "labels": a.labels},
        "run": {
            "id": a.run_id.to_string(),
            "attempt": a.attempt,
            "fence": a.fence,
            "scheduled_for": a.scheduled_for.to_string(),
            "trigger": a.trigger.as_str(),
        },
        "payload": a.payload,
    })
}

fn render(
    env: &Environment<'_>,
    value: &serde_json::Value,
    ctx: &minijinja::Value,
) -> Result<serde_json::Value, ActionError> {
    Ok(match value {
        serde_json::Value::String(s) if s.contains("{{") || s.contains("{%") => {
            let text = env
                .render_str(s, ctx.clone())
                .map_err(|e| ActionError::permanent(format!("template `{s}` failed: {e}")))?;
            serde_json::Value::String(text)
        }
        serde_json::Value::Array(items) => serde_json::Value::Array(
            items
                .iter()
                .map(|v| render(env, v, ctx))
                .collect::<Result<_, _>>()?,
        ),
        serde_json::Value::Object(map) => serde_json::Value::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), render(env, v, ctx)?)))
                .collect::<Result<_, ActionError>>()?,
        ),
        other => other.clone(),
    })
}
