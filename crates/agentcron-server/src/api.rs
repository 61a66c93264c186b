//! The HTTP API (first part): health, readiness; under `/api/v1` creating,
//! reading, pausing and resuming tasks, listing a task's runs, reading and
//! cancelling runs. Errors are `application/problem+json` (RFC 9457)
//! and name the field at fault.

use std::sync::Arc;

use agentcron::store::{NewTask, SqliteStore, Store, StoreError};
use agentcron::{Engine, Run, RunId, SystemClock, Task, TaskId, TaskSpec};
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};

/// What the handlers share.
pub(crate) struct Api {
    pub(crate) store: SqliteStore,
    pub(crate) engine: Arc<Engine<SqliteStore, SystemClock>>,
}

pub(crate) fn router(api: Arc<Api>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/api/v1/tasks", axum::routing::post(create_task))
        .route("/api/v1/tasks/{key}", get(get_task))
        .route("/api/v1/tasks/{key}/runs", get(task_runs))
        .route("/api/v1/tasks/{key}/pause", axum::routing::post(pause_task))
        .route(
            "/api/v1/tasks/{key}/resume",
            axum::routing::post(resume_task),
        )
        .route("/api/v1/runs/{id}", get(get_run))
        .route("/api/v1/runs/{id}/cancel", axum::routing::post(cancel_run))
        .with_state(api)
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
}

impl Problem {
    fn new(status: StatusCode, title: &'static str, detail: impl Into<String>) -> Self {
        Problem {
            kind: "about:blank",
            title,
            status: status.as_u16(),
            detail: detail.into(),
            field: None,
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

async fn readyz(State(api): State<Arc<Api>>) -> Result<Json<serde_json::Value>, Problem> {
    api.store.next_fire_at().await?;
    Ok(Json(serde_json::json!({"status": "ready"})))
}

async fn create_task(
    State(api): State<Arc<Api>>,
    body: Result<Json<serde_json::Value>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, Problem> {
    let Json(body) = body.map_err(|e| {
        Problem::new(
            StatusCode::BAD_REQUEST,
            "Bad Request",
            format!("the body is not JSON: {}", e.body_text()),
        )
    })?;
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
struct RunsQuery {
    limit: Option<u32>,
}

async fn task_runs(
    State(api): State<Arc<Api>>,
    Path(key): Path<String>,
    axum::extract::Query(q): axum::extract::Query<RunsQuery>,
) -> Result<Json<Vec<Run>>, Problem> {
    let task = find_task(&api, &key).await?;
    let limit = q.limit.unwrap_or(50).clamp(1, 1000);
    Ok(Json(api.store.runs_of_task(task.id, limit).await?))
}

async fn pause_task(
    State(api): State<Arc<Api>>,
    Path(key): Path<String>,
) -> Result<Json<Task>, Problem> {
    let task = find_task(&api, &key).await?;
    if !api.engine.pause(task.id).await? {
        return Err(Problem::new(
            StatusCode::CONFLICT,
            "Conflict",
            format!(
                "task `{}` is {}, not active",
                task.spec.name,
                task.state.as_str()
            ),
        ));
    }
    find_task(&api, &key).await.map(Json)
}

async fn resume_task(
    State(api): State<Arc<Api>>,
    Path(key): Path<String>,
) -> Result<Json<Task>, Problem> {
    let task = find_task(&api, &key).await?;
    if !api.engine.resume(task.id).await? {
        return Err(Problem::new(
            StatusCode::CONFLICT,
            "Conflict",
            format!(
                "task `{}` is {}, not paused",
                task.spec.name,
                task.state.as_str()
            ),
        ));
    }
    find_task(&api, &key).await.map(Json)
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

async fn get_run(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
) -> Result<Json<Run>, Problem> {
    find_run(&api, run_id(&id)?).await.map(Json)
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
