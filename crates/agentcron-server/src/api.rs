//! The HTTP API (first part): health, readiness, and creating and reading
//! tasks under `/api/v1`. Errors are `application/problem+json` (RFC 9457)
//! and name the field at fault.

use std::sync::Arc;

use agentcron::store::{NewTask, SqliteStore, Store, StoreError};
use agentcron::{Engine, SystemClock, Task, TaskId, TaskSpec};
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

async fn get_task(
    State(api): State<Arc<Api>>,
    Path(key): Path<String>,
) -> Result<Json<Task>, Problem> {
    let task = match key.parse::<TaskId>() {
        Ok(id) => api.store.get_task(id).await?,
        Err(_) => api.store.get_task_by_name(&key).await?,
    };
    task.map(Json).ok_or_else(|| {
        Problem::new(
            StatusCode::NOT_FOUND,
            "Not Found",
            format!("no task with id or name `{key}`"),
        )
    })
}
