//! `POST /api/v1/integrations/slack/actions`: Slack's interactivity requests (a click on a
//! question's button). Slack's `v0` signature is the credential; a request without a valid
//! one, or older than five minutes, gets 401. The click is applied as the operator's answer
//! through the same forward-first path as `POST /api/v1/clarifications/{id}/respond`, and
//! the message is then replaced with who answered.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use serde_json::json;
use tracing::Instrument;

use crate::config::SlackConfig;
use crate::http::error::AppError;
use crate::model::Timestamp;
use crate::reach::slack::{self, Click};
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/integrations/slack/actions", post(actions))
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

async fn actions(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<StatusCode, AppError> {
    let Some(config) = state.config.integrations.slack.clone() else {
        return Err(AppError::NotFound {
            message: "[integrations.slack] is not configured".into(),
            origin: None,
        });
    };
    slack::verify(
        &config.signing_secret,
        header(&headers, slack::TIMESTAMP_HEADER),
        header(&headers, slack::SIGNATURE_HEADER),
        &body,
        Timestamp::now().instant().timestamp(),
    )
    .map_err(|refused| {
        tracing::warn!(reason = %refused, "slack action refused");
        AppError::Unauthorized {
            code: "INVALID_SLACK_SIGNATURE",
            message: refused.to_string(),
        }
    })?;
    let click = slack::click(&body).map_err(|refused| AppError::BadRequest(refused.to_string()))?;
    let span = tracing::info_span!("slack_action", pending_id = %click.pending_id);
    let (outcome, record) = apply(&state, &click).instrument(span.clone()).await;
    let _entered = span.enter();
    tracing::info!(outcome = %outcome, "slack click applied");
    if let Some(record) = record {
        update_message(
            &config,
            &click,
            slack::settled_text(&click, &record, &outcome),
        );
    }
    // Slack wants its answer within three seconds; the message update follows on its own.
    Ok(StatusCode::OK)
}

/// Applies a click: `"ok"`, or why not, with the record when there is one.
async fn apply(state: &AppState, click: &Click) -> (String, Option<crate::model::Clarification>) {
    let record = match state
        .clarifications
        .record_of(&*state.sessions, &click.pending_id)
        .await
    {
        Ok(Some(record)) => record,
        Ok(None) => return ("the question is gone".into(), None),
        Err(err) => return (AppError::from(err).to_string(), None),
    };
    let Some(answer) = slack::answer(click, &record) else {
        return (
            "that is not one of the question's options".into(),
            Some(record),
        );
    };
    match state
        .clarifications
        .respond(
            &*state.sessions,
            &click.pending_id,
            answer,
            &click.answered_by,
        )
        .await
    {
        Ok(_) => ("ok".into(), Some(record)),
        Err(err) => (err.to_string(), Some(record)),
    }
}

/// Replaces the question's message (Slack's `response_url`, when it is one of Slack's).
fn update_message(config: &SlackConfig, click: &Click, text: String) {
    let Some(url) = click
        .response_url
        .clone()
        .filter(|url| url.starts_with(&config.response_url_prefix))
    else {
        return;
    };
    kandev_tls::install_process_provider();
    tokio::spawn(async move {
        let body = json!({"replace_original": true, "text": text});
        let sent = reqwest::Client::new()
            .post(url)
            .timeout(crate::reach::dispatch::REQUEST_TIMEOUT)
            .json(&body)
            .send()
            .await;
        if let Err(err) = sent {
            tracing::warn!(error = %err.without_url(), "slack message not updated");
        }
    });
}
