//! The `http` action: call an agent's endpoint. 2xx is success and the
//! response body (capped) is the run's result. 408, 429 and 5xx are worth a
//! retry (honouring `Retry-After`), as are network errors; other 4xx are not,
//! unless the task sets `retry.retry_4xx`.
//!
//! Every request carries `Idempotency-Key: <run id>` (the same on every
//! attempt and recovery), `X-Agentcron-Run`, `-Attempt`, `-Fence`, and a W3C
//! `traceparent` whose trace id is the run id.

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::{ActionError, Attempt, template};

/// A client shared by all attempts (connection pooling).
pub(crate) fn client() -> Result<reqwest::Client, ActionError> {
    // rustls needs one process-wide crypto provider; installing twice is harmless.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .user_agent(concat!("agentcron/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| ActionError::permanent(format!("cannot build the HTTP client: {e}")))
}

/// What to send: an `http` action's own fields.
pub(crate) struct Call<'a> {
    pub(crate) method: &'a str,
    pub(crate) url: &'a str,
    pub(crate) headers: &'a BTreeMap<String, String>,
    pub(crate) body: Option<&'a serde_json::Value>,
}

pub(crate) async fn call(
    client: &reqwest::Client,
    call: Call<'_>,
    attempt: &Attempt,
    retry_4xx: bool,
    cap: usize,
) -> Result<Option<serde_json::Value>, ActionError> {
    let Call {
        method,
        url,
        headers,
        body,
    } = call;
    let method = reqwest::Method::from_bytes(method.as_bytes())
        .map_err(|_| ActionError::permanent(format!("invalid HTTP method `{method}`")))?;
    let mut request = client
        .request(method, url)
        .headers(standard_headers(attempt)?);
    for (name, value) in headers {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| ActionError::permanent(format!("invalid header name `{name}`")))?;
        let value = HeaderValue::from_str(value)
            .map_err(|_| ActionError::permanent(format!("invalid value for header `{name}`")))?;
        request = request.header(name, value);
    }
    // The run's payload override wins over the task's body.
    let body = attempt.payload.as_ref().or(body);
    if let Some(body) = body {
        let rendered = template::render_json(body, attempt)?;
        request = request
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(rendered.to_string());
    }
    let mut response = request.send().await.map_err(|e| {
        ActionError::retryable(format!("request to {url} failed: {}", error_chain(&e)))
    })?;
    let status = response.status();
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_retry_after);
    let body = read_capped(&mut response, cap).await?;
    if status.is_success() {
        return Ok(Some(as_result(&body)));
    }
    let snippet: String = String::from_utf8_lossy(&body).chars().take(200).collect();
    let message = format!("HTTP {status} from {url}: {snippet}");
    let code = status.as_u16();
    if code == 408
        || code == 429
        || status.is_server_error()
        || (retry_4xx && status.is_client_error())
    {
        Err(ActionError::Retryable {
            message,
            retry_after,
        })
    } else {
        Err(ActionError::permanent(message))
    }
}

fn standard_headers(a: &Attempt) -> Result<HeaderMap, ActionError> {
    let run = a.run_id.to_string();
    let trace = format!("00-{}-{:016x}-01", a.run_id.0.simple(), a.fence.max(1));
    let mut h = HeaderMap::new();
    for (name, value) in [
        ("idempotency-key", run.clone()),
        ("x-agentcron-run", run),
        ("x-agentcron-attempt", a.attempt.to_string()),
        ("x-agentcron-fence", a.fence.to_string()),
        ("traceparent", trace),
    ] {
        let value = HeaderValue::from_str(&value)
            .map_err(|_| ActionError::permanent(format!("invalid header value for {name}")))?;
        h.insert(HeaderName::from_static(name), value);
    }
    Ok(h)
}

/// Reads at most `cap` bytes of the body.
async fn read_capped(response: &mut reqwest::Response, cap: usize) -> Result<Vec<u8>, ActionError> {
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                let room = cap.saturating_sub(body.len());
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                if body.len() >= cap {
                    break;
                }
            }
            Ok(None) => break,
            Err(e) => {
                return Err(ActionError::retryable(format!(
                    "reading the response failed: {}",
                    error_chain(&e)
                )));
            }
        }
    }
    Ok(body)
}

/// JSON bodies are kept as JSON; anything else as a string.
fn as_result(body: &[u8]) -> serde_json::Value {
    serde_json::from_slice(body)
        .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(body).into_owned()))
}

/// The longest `Retry-After` honoured; a longer ask waits this long.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(86_400);

/// `Retry-After: 120` or `Retry-After: Wed, 21 Oct 2026 07:28:00 GMT`, at
/// most a day.
fn parse_retry_after(v: &str) -> Option<Duration> {
    let wait = if let Ok(secs) = v.trim().parse::<u64>() {
        Duration::from_secs(secs)
    } else {
        let at = jiff::fmt::rfc2822::parse(v.trim()).ok()?;
        let wait = at.timestamp().duration_since(jiff::Timestamp::now());
        Some(wait.unsigned_abs()).filter(|_| wait.is_positive())?
    };
    Some(wait.min(MAX_RETRY_AFTER))
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_read_and_capped_at_a_day() {
        assert_eq!(parse_retry_after(" 120 "), Some(Duration::from_secs(120)));
        assert_eq!(
            parse_retry_after("99999999999999"),
            Some(MAX_RETRY_AFTER),
            "a server cannot park a run for ages"
        );
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(parse_retry_after("soon"), None);
    }
}
