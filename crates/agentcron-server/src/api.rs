//! The HTTP API (first part): health, readiness; under `/api/v1` creating,
//! reading, changing (`PATCH` with `If-Match`), deleting, pausing, resuming
//! and triggering tasks, their upcoming fires, listing a task's runs,
//! reading and cancelling runs, and a cron preview. Errors are `application/problem+json` (RFC 9457)
//! and name the field at fault.

use std::sync::Arc;

use agentcron::store::{AnyStore, NewTask, Store, StoreError};
use agentcron::{Engine, Run, RunId, SystemClock, Task, TaskId, TaskSpec};
use axum::extract::{Path, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::MethodFilter;
use axum::{Json, Router};

/// What the handlers share.
pub(crate) struct Api {
    pub(crate) store: AnyStore,
    pub(crate) engine: Arc<Engine<AnyStore, SystemClock>>,
    /// API tokens; empty means open (loopback only).
    pub(crate) tokens: crate::auth::Tokens,
}

/// A router that records each route it is given, so the OpenAPI document
/// can be checked against the real routes.
pub(crate) struct Routes {
    router: Router<Arc<Api>>,
    table: Vec<(Method, &'static str)>,
}

impl Routes {
    fn new() -> Self {
        Routes {
            router: Router::new(),
            table: Vec::new(),
        }
    }

    fn add<H, T>(mut self, method: Method, path: &'static str, handler: H) -> Self
    where
        H: axum::handler::Handler<T, Arc<Api>>,
        T: 'static,
    {
        let Ok(filter) = MethodFilter::try_from(method.clone()) else {
            unreachable!("routes use the standard methods, not {method}")
        };
        self.router = self.router.route(path, axum::routing::on(filter, handler));
        self.table.push((method, path));
        self
    }
}

/// Open to anyone: probes and the API's description.
fn public_routes() -> Routes {
    Routes::new()
        .add(Method::GET, "/healthz", healthz)
        .add(Method::GET, "/readyz", readyz)
        .add(Method::GET, "/api/v1/openapi.json", openapi)
}

/// Behind the token check (when tokens are configured).
fn protected_routes() -> Routes {
    Routes::new()
        .add(Method::POST, "/api/v1/tasks", create_task)
        .add(Method::GET, "/api/v1/tasks", list_tasks)
        .add(Method::GET, "/api/v1/tasks/{key}", get_task)
        .add(Method::PATCH, "/api/v1/tasks/{key}", patch_task)
        .add(Method::DELETE, "/api/v1/tasks/{key}", delete_task)
        .add(Method::POST, "/api/v1/tasks/{key}/pause", pause_task)
        .add(Method::POST, "/api/v1/tasks/{key}/resume", resume_task)
        .add(Method::POST, "/api/v1/tasks/{key}/trigger", trigger)
        .add(Method::GET, "/api/v1/tasks/{key}/upcoming", upcoming)
        .add(Method::GET, "/api/v1/tasks/{key}/runs", task_runs)
        .add(Method::GET, "/api/v1/runs", list_runs)
        .add(Method::GET, "/api/v1/runs/{id}", get_run)
        .add(Method::POST, "/api/v1/runs/{id}/cancel", cancel_run)
        .add(Method::GET, "/api/v1/nodes", nodes)
        .add(Method::POST, "/api/v1/cron/preview", cron_preview)
}

/// Every route: method and path template.
#[cfg(test)]
pub(crate) fn route_table() -> Vec<(Method, &'static str)> {
    let mut table = public_routes().table;
    table.extend(protected_routes().table);
    table
}

pub(crate) fn router(api: Arc<Api>) -> Router {
    let protected = protected_routes()
        .router
        .route_layer(axum::middleware::from_fn_with_state(
            api.clone(),
            require_token,
        ));
    let swagger = swagger_ui_dist::generate_routes(swagger_ui_dist::ApiDefinition {
        uri_prefix: "/api/docs",
        api_definition: swagger_ui_dist::OpenApiSource::Uri("/api/v1/openapi.json"),
        title: Some("agentcron API"),
    });
    public_routes()
        .router
        .merge(protected)
        .with_state(api)
        .merge(swagger)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
}

/// Checks the bearer token when the server has tokens: GET and HEAD need
/// the read role, everything else write.
async fn require_token(
    State(api): State<Arc<Api>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if api.tokens.is_empty() {
        return next.run(request).await;
    }
    let needs = if matches!(*request.method(), Method::GET | Method::HEAD) {
        crate::auth::Role::Read
    } else {
        crate::auth::Role::Write
    };
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    match api.tokens.check(authorization, needs) {
        Ok(_) => next.run(request).await,
        Err(refusal @ crate::auth::Refusal::Unauthenticated(_)) => {
            let mut response =
                Problem::new(StatusCode::UNAUTHORIZED, "Unauthorized", refusal.detail())
                    .into_response();
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"agentcron\""),
            );
            response
        }
        Err(refusal) => {
            Problem::new(StatusCode::FORBIDDEN, "Forbidden", refusal.detail()).into_response()
        }
    }
}

async fn not_found(uri: axum::http::Uri) -> Problem {
    Problem::new(
        StatusCode::NOT_FOUND,
        "Not Found",
        format!(
            "no such endpoint: {} (see /api/v1/openapi.json)",
            uri.path()
        ),
    )
}

async fn method_not_allowed(method: Method, uri: axum::http::Uri) -> Problem {
    Problem::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "Method Not Allowed",
        format!("{} does not take {method}", uri.path()),
    )
}

async fn openapi() -> Json<serde_json::Value> {
    Json(crate::openapi::document())
}

/// Largest request body accepted; larger ones answer 413.
const MAX_BODY: usize = 1 << 20;

/// A JSON body that could not be read: 413 when too large, 400 or 415 otherwise.
fn body_problem(e: &axum::extract::rejection::JsonRejection) -> Problem {
    let status = e.status();
    let title = status.canonical_reason().unwrap_or("Bad Request");
    Problem::new(
        status,
        title,
        format!("the body could not be read as JSON: {}", e.body_text()),
    )
}

/// An RFC 9457 problem.
#[derive(Debug, serde::Serialize)]
pub(crate) struct Problem {
    #[serde(rename = "type")]
    kind: &'static str,
    title: &'static str,
    status: u16,
    detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<String>,
    /// For cron expressions: the 1-based column at fault.
    #[serde(skip_serializing_if = "Option::is_none")]
    column: Option<usize>,
}

impl Problem {
    fn new(status: StatusCode, title: &'static str, detail: impl Into<String>) -> Self {
        Problem {
            kind: "about:blank",
            title,
            status: status.as_u16(),
            detail: detail.into(),
            field: None,
            column: None,
        }
    }

    fn field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (status, Json(self)).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        response
    }
}

impl From<StoreError> for Problem {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::DuplicateName(name) => Problem::new(
                StatusCode::CONFLICT,
                "Conflict",
                format!("a task named `{name}` already exists"),
            )
            .field("name"),
            other => {
                tracing::error!(error = %other, "store error in the API");
                Problem::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "Service Unavailable",
                    other.to_string(),
                )
            }
        }
    }
}

async fn healthz() -> &'static str {
    "ok"
}

/// Ready when the database answers within 2 s.
async fn readyz(State(api): State<Arc<Api>>) -> Result<Json<serde_json::Value>, Problem> {
    match tokio::time::timeout(std::time::Duration::from_secs(2), api.store.next_fire_at()).await {
        Ok(answer) => {
            answer?;
            Ok(Json(serde_json::json!({"status": "ready"})))
        }
        Err(_) => Err(Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "Service Unavailable",
            "the database did not answer within 2 s",
        )),
    }
}

async fn create_task(
    State(api): State<Arc<Api>>,
    body: Result<Json<serde_json::Value>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, Problem> {
    let Json(body) = body.map_err(|e| body_problem(&e))?;
    let spec: TaskSpec = serde_json::from_value(body).map_err(|e| {
        Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Unprocessable Entity",
            e.to_string(),
        )
    })?;
    let id = TaskId::new();
    let schedule = spec.validate(&id.to_string()).map_err(|e| {
        Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Unprocessable Entity",
            e.message.clone(),
        )
        .field(e.field)
    })?;
    let now = jiff::Timestamp::now();
    let task = api
        .store
        .create_task(NewTask {
            id,
            next_fire_at: schedule.next_after(now),
            spec,
            now,
        })
        .await?;
    api.engine.wake();
    let location = HeaderValue::from_str(&format!("/api/v1/tasks/{}", task.id)).map_err(|e| {
        Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Internal Server Error",
            e.to_string(),
        )
    })?;
    let mut response = (StatusCode::CREATED, Json(task)).into_response();
    response.headers_mut().insert(header::LOCATION, location);
    Ok(response)
}

/// A task by id or, failing that, by name.
async fn find_task(api: &Api, key: &str) -> Result<Task, Problem> {
    let task = match key.parse::<TaskId>() {
        Ok(id) => api.store.get_task(id).await?,
        Err(_) => api.store.get_task_by_name(key).await?,
    };
    task.ok_or_else(|| {
        Problem::new(
            StatusCode::NOT_FOUND,
            "Not Found",
            format!("no task with id or name `{key}`"),
        )
    })
}

async fn get_task(
    State(api): State<Arc<Api>>,
    Path(key): Path<String>,
) -> Result<Json<Task>, Problem> {
    find_task(&api, &key).await.map(Json)
}

/// Query of `GET /tasks/{key}/runs`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RunsQuery {
    limit: Option<u32>,
}

async fn task_runs(
    State(api): State<Arc<Api>>,
    Path(key): Path<String>,
    q: Result<axum::extract::Query<RunsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Vec<Run>>, Problem> {
    let axum::extract::Query(q) = q.map_err(query_problem)?;
    let task = find_task(&api, &key).await?;
    let limit = bounded("limit", q.limit, 50, 1000)?;
    Ok(Json(api.store.runs_of_task(task.id, limit).await?))
}

/// Pause or resume.
#[derive(Clone, Copy)]
enum Switch {
    Pause,
    Resume,
}

/// `POST /tasks/{key}/pause` and `/resume`: 409 when the task is not in the
/// state the switch needs.
async fn switch_task(api: &Api, key: &str, switch: Switch) -> Result<Json<Task>, Problem> {
    let task = find_task(api, key).await?;
    let (done, needs) = match switch {
        Switch::Pause => (api.engine.pause(task.id).await?, "active"),
        Switch::Resume => (api.engine.resume(task.id).await?, "paused"),
    };
    if !done {
        let detail = format!(
            "task `{}` is {}, not {needs}",
            task.spec.name,
            task.state.as_str()
        );
        return Err(Problem::new(StatusCode::CONFLICT, "Conflict", detail));
    }
    find_task(api, key).await.map(Json)
}

async fn pause_task(
    State(api): State<Arc<Api>>,
    Path(key): Path<String>,
) -> Result<Json<Task>, Problem> {
    switch_task(&api, &key, Switch::Pause).await
}

async fn resume_task(
    State(api): State<Arc<Api>>,
    Path(key): Path<String>,
) -> Result<Json<Task>, Problem> {
    switch_task(&api, &key, Switch::Resume).await
}

fn run_id(id: &str) -> Result<RunId, Problem> {
    id.parse().map_err(|_| {
        Problem::new(
            StatusCode::BAD_REQUEST,
            "Bad Request",
            format!("`{id}` is not a run id"),
        )
        .field("id")
    })
}

async fn find_run(api: &Api, id: RunId) -> Result<Run, Problem> {
    api.store.get_run(id).await?.ok_or_else(|| {
        Problem::new(
            StatusCode::NOT_FOUND,
            "Not Found",
            format!("no run with id `{id}`"),
        )
    })
}

/// A run, with its attempts.
async fn get_run(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, Problem> {
    let id = run_id(&id)?;
    let run = find_run(&api, id).await?;
    let attempts = api.store.attempts(id).await?;
    let internal = |e: serde_json::Error| {
        Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Internal Server Error",
            e.to_string(),
        )
    };
    let mut doc = serde_json::to_value(run).map_err(internal)?;
    doc["attempts"] = serde_json::to_value(attempts).map_err(internal)?;
    Ok(Json(doc))
}

async fn cancel_run(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
) -> Result<Json<Run>, Problem> {
    let id = run_id(&id)?;
    let run = find_run(&api, id).await?;
    if !api
        .engine
        .cancel_run(id, "cancelled through the API")
        .await?
    {
        return Err(Problem::new(
            StatusCode::CONFLICT,
            "Conflict",
            format!("run `{id}` has already finished ({})", run.status.as_str()),
        ));
    }
    find_run(&api, id).await.map(Json)
}

/// `?count=N` (default 5, at most 100).
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CountQuery {
    count: Option<u32>,
}

async fn upcoming(
    State(api): State<Arc<Api>>,
    Path(key): Path<String>,
    q: Result<axum::extract::Query<CountQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<serde_json::Value>, Problem> {
    let axum::extract::Query(q) = q.map_err(query_problem)?;
    let task = find_task(&api, &key).await?;
    let schedule = agentcron::CompiledSchedule::compile(&task.spec.schedule, &task.id.to_string())
        .map_err(|e| {
            Problem::new(StatusCode::CONFLICT, "Conflict", e.to_string()).field(e.field)
        })?;
    let mut next = Vec::new();
    let mut at = jiff::Timestamp::now();
    let count = bounded("count", q.count, 5, 100)?;
    while next.len() < count as usize {
        let Some(n) = schedule.next_after(at) else {
            break;
        };
        next.push(n.to_string());
        at = n;
    }
    Ok(Json(
        serde_json::json!({"task": task.spec.name, "state": task.state, "next": next}),
    ))
}

async fn trigger(
    State(api): State<Arc<Api>>,
    Path(key): Path<String>,
    body: Result<Option<Json<serde_json::Value>>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, Problem> {
    let body = body.map_err(|e| body_problem(&e))?;
    let task = find_task(&api, &key).await?;
    let payload = match body.map(|Json(b)| b) {
        None => None,
        Some(serde_json::Value::Object(mut o)) => {
            if let Some(k) = o.keys().find(|k| *k != "payload") {
                return Err(Problem::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Unprocessable Entity",
                    format!("unknown field `{k}`, expected `payload`"),
                )
                .field(k.clone()));
            }
            o.remove("payload")
        }
        Some(_) => {
            return Err(Problem::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Unprocessable Entity",
                "the body must be an object like {\"payload\": …}",
            ));
        }
    };
    let Some(id) = api.engine.trigger(task.id, payload).await? else {
        return Err(Problem::new(
            StatusCode::NOT_FOUND,
            "Not Found",
            format!("no task with id or name `{key}`"),
        ));
    };
    let run = find_run(&api, id).await?;
    Ok((StatusCode::ACCEPTED, Json(run)).into_response())
}

/// RFC 7386 merge patch: objects merge key by key, `null` removes a key.
fn merge(target: &mut serde_json::Value, patch: serde_json::Value) {
    match (target, patch) {
        (serde_json::Value::Object(t), serde_json::Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(&k);
                } else {
                    merge(t.entry(k).or_insert(serde_json::Value::Null), v);
                }
            }
        }
        (t, p) => *t = p,
    }
}

async fn patch_task(
    State(api): State<Arc<Api>>,
    Path(key): Path<String>,
    headers: axum::http::HeaderMap,
    body: Result<Json<serde_json::Value>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Task>, Problem> {
    let task = find_task(&api, &key).await?;
    let Some(expected) = headers.get(header::IF_MATCH) else {
        return Err(Problem::new(
            StatusCode::PRECONDITION_REQUIRED,
            "Precondition Required",
            format!(
                "send If-Match: <version> (the task is at version {})",
                task.version
            ),
        ));
    };
    let expected: i64 = expected
        .to_str()
        .ok()
        .map(|v| v.trim().trim_matches('"'))
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| {
            Problem::new(
                StatusCode::BAD_REQUEST,
                "Bad Request",
                "If-Match must be the task's version, a whole number",
            )
            .field("If-Match")
        })?;
    let Json(patch) = body.map_err(|e| body_problem(&e))?;
    let mut doc = serde_json::to_value(&task.spec).map_err(|e| {
        Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Internal Server Error",
            e.to_string(),
        )
    })?;
    merge(&mut doc, patch);
    let spec: TaskSpec = serde_json::from_value(doc).map_err(|e| {
        Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Unprocessable Entity",
            e.to_string(),
        )
    })?;
    let schedule = spec.validate(&task.id.to_string()).map_err(|e| {
        Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Unprocessable Entity",
            e.message.clone(),
        )
        .field(e.field)
    })?;
    let now = jiff::Timestamp::now();
    let next_fire_at = if spec.schedule == task.spec.schedule {
        task.next_fire_at
    } else {
        schedule.next_after(now)
    };
    let update = agentcron::store::UpdateTask {
        id: task.id,
        expected_version: expected,
        spec,
        state: task.state,
        next_fire_at,
        now,
    };
    match api.store.update_task(update).await {
        Ok(t) => {
            api.engine.wake();
            Ok(Json(t))
        }
        Err(StoreError::VersionConflict { current, .. }) => Err(Problem::new(
            StatusCode::PRECONDITION_FAILED,
            "Precondition Failed",
            format!("the task is at version {current}, not {expected}; read it again"),
        )
        .field("If-Match")),
        Err(e) => Err(e.into()),
    }
}

async fn delete_task(
    State(api): State<Arc<Api>>,
    Path(key): Path<String>,
) -> Result<StatusCode, Problem> {
    let task = find_task(&api, &key).await?;
    // Stop it first: fires planned or claimed ahead are removed.
    if task.state == agentcron::TaskState::Active {
        api.engine.pause(task.id).await?;
    }
    let task = find_task(&api, &key).await?;
    let update = agentcron::store::UpdateTask {
        id: task.id,
        expected_version: task.version,
        spec: task.spec,
        state: agentcron::TaskState::Cancelled,
        next_fire_at: None,
        now: jiff::Timestamp::now(),
    };
    api.store.update_task(update).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Body of `POST /cron/preview`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Preview {
    expression: String,
    #[serde(default)]
    timezone: Option<String>,
    #[serde(default)]
    count: Option<u32>,
}

async fn cron_preview(
    body: Result<Json<Preview>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<serde_json::Value>, Problem> {
    let Json(p) = body.map_err(|e| {
        Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Unprocessable Entity",
            e.body_text(),
        )
    })?;
    let count = bounded("count", p.count, 5, 100)?;
    let zone = p.timezone.unwrap_or_else(|| "UTC".into());
    let tz = jiff::tz::TimeZone::get(&zone).map_err(|e| {
        Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Unprocessable Entity",
            format!("unknown time zone `{zone}`: {e}"),
        )
        .field("timezone")
    })?;
    let schedule = agentcron::cron::Schedule::builder()
        .hash_key("preview")
        .parse(&p.expression)
        .map_err(|e| {
            let mut problem = Problem::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Unprocessable Entity",
                e.to_string(),
            )
            .field("expression");
            problem.column = e.column();
            problem
        })?;
    let start = jiff::Timestamp::now().to_zoned_datetime(tz);
    let next: Vec<String> = schedule
        .iter_after(&start)
        .take(count as usize)
        .map(|z| z.timestamp().display_with_offset(z.offset()).to_string())
        .collect();
    Ok(Json(serde_json::json!({
        "valid": true,
        "description": schedule.describe(agentcron::cron::Lang::En),
        "next": next,
    })))
}

/// Query of `GET /tasks`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TasksQuery {
    state: Option<String>,
    /// `key=value`.
    label: Option<String>,
    name_prefix: Option<String>,
    after: Option<String>,
    limit: Option<u32>,
}

/// `value` (or `default` when absent), refused outside `1..=max`.
fn bounded(field: &str, value: Option<u32>, default: u32, max: u32) -> Result<u32, Problem> {
    let v = value.unwrap_or(default);
    if !(1..=max).contains(&v) {
        return Err(Problem::new(
            StatusCode::BAD_REQUEST,
            "Bad Request",
            format!("{field} must be between 1 and {max}, not {v}"),
        )
        .field(field));
    }
    Ok(v)
}

fn query_problem(e: axum::extract::rejection::QueryRejection) -> Problem {
    Problem::new(StatusCode::BAD_REQUEST, "Bad Request", e.body_text())
}

async fn list_tasks(
    State(api): State<Arc<Api>>,
    q: Result<axum::extract::Query<TasksQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<serde_json::Value>, Problem> {
    let axum::extract::Query(q) = q.map_err(query_problem)?;
    let state = match q.state.as_deref() {
        None => None,
        Some(s) => Some(agentcron::TaskState::parse(s).ok_or_else(|| {
            Problem::new(
                StatusCode::BAD_REQUEST,
                "Bad Request",
                format!("state `{s}` is not one of active, paused, cancelled, completed"),
            )
            .field("state")
        })?),
    };
    let label = match q.label {
        None => None,
        Some(l) => Some(
            l.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .ok_or_else(|| {
                    Problem::new(
                        StatusCode::BAD_REQUEST,
                        "Bad Request",
                        format!("label `{l}` is not key=value"),
                    )
                    .field("label")
                })?,
        ),
    };
    let after = match q.after {
        None => None,
        Some(a) => Some(a.parse::<TaskId>().map_err(|_| {
            Problem::new(
                StatusCode::BAD_REQUEST,
                "Bad Request",
                format!("after `{a}` is not a task id"),
            )
            .field("after")
        })?),
    };
    let limit = bounded("limit", q.limit, 50, 500)?;
    let tasks = api
        .store
        .list_tasks(agentcron::store::ListTasks {
            state,
            label,
            name_prefix: q.name_prefix,
            after,
            limit,
        })
        .await?;
    let next = (tasks.len() == limit as usize)
        .then(|| tasks.last().map(|t| t.id.to_string()))
        .flatten();
    Ok(Json(serde_json::json!({"tasks": tasks, "next": next})))
}

/// Query of `GET /runs`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RunsListQuery {
    status: Option<String>,
    /// A task id or name.
    task: Option<String>,
    before: Option<String>,
    limit: Option<u32>,
}

async fn list_runs(
    State(api): State<Arc<Api>>,
    q: Result<axum::extract::Query<RunsListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<serde_json::Value>, Problem> {
    let axum::extract::Query(q) = q.map_err(query_problem)?;
    let status = match q.status.as_deref() {
        None => None,
        Some(s) => Some(agentcron::RunStatus::parse(s).ok_or_else(|| {
            Problem::new(
                StatusCode::BAD_REQUEST,
                "Bad Request",
                format!("status `{s}` is not a run status"),
            )
            .field("status")
        })?),
    };
    let task = match q.task {
        None => None,
        Some(key) => Some(find_task(&api, &key).await?.id),
    };
    let before = match q.before {
        None => None,
        Some(b) => Some(run_id(&b).map_err(|p| p.field("before"))?),
    };
    let limit = bounded("limit", q.limit, 50, 500)?;
    let runs = api
        .store
        .list_runs(agentcron::store::ListRuns {
            status,
            task,
            before,
            limit,
        })
        .await?;
    let next = (runs.len() == limit as usize)
        .then(|| runs.last().map(|r| r.id.to_string()))
        .flatten();
    Ok(Json(serde_json::json!({"runs": runs, "next": next})))
}

/// The nodes that ran the engine on this database, most recently seen first.
async fn nodes(State(api): State<Arc<Api>>) -> Result<Json<serde_json::Value>, Problem> {
    Ok(Json(serde_json::json!({"nodes": api.store.nodes().await?})))
}
