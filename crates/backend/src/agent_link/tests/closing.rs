//! How a link ends: shut down, dropped, silent, replaced, or given up on.

use super::*;

#[tokio::test]
async fn shutdown_asks_agentctl_to_stop_then_closes_for_good() {
    let (_server, link, mut events, mut conn) = started().await;
    let ((), ()) = tokio::join!(link.shutdown(), async {
        let request = conn.expect(action::SHUTDOWN, "the shutdown").await;
        conn.reply(&request, &Success::OK).await;
        conn.expect_closed().await;
    });
    // No Disconnected, no reconnect: the receiver simply ends.
    expect_end(&mut events).await;
    assert!(!link.is_connected());
    refused(&link, action::CANCEL, &Empty {}).await;
    link.shutdown().await; // a second call is harmless
}

#[tokio::test]
async fn shutdown_before_any_session_sends_nothing() {
    let (_server, link, mut events, mut conn) = linked(quick()).await;
    let ((), ()) = tokio::join!(link.shutdown(), conn.expect_closed());
    expect_end(&mut events).await;
}

#[tokio::test]
async fn dropping_every_clone_closes_the_stream() {
    let (_server, link, mut events, mut conn) = linked(quick()).await;
    drop(link);
    conn.expect_closed().await;
    expect_end(&mut events).await;
}

#[tokio::test]
async fn a_silent_peer_is_dropped_after_missed_heartbeats() {
    let options = LinkOptions {
        heartbeat_interval: Duration::from_millis(50),
        ..quick()
    };
    let (_server, _link, mut events, mut conn) = linked(options).await;
    // The server never reads, so it never answers the pings.
    assert_eq!(next_event(&mut events).await, LinkEvent::Disconnected);
    let mut pings = 0;
    while let Ok(Some(Ok(frame))) = tokio::time::timeout(WAIT, conn.ws.next()).await {
        if frame.is_ping() {
            pings += 1;
        }
    }
    assert!(pings >= 1, "the link pinged before giving up");
}

#[tokio::test]
async fn a_replaced_stream_is_lost_without_reconnecting() {
    use tokio_tungstenite::tungstenite::protocol::CloseFrame;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

    let (_server, link, mut events, mut conn) = started().await;
    let close = CloseFrame {
        code: CloseCode::Normal,
        reason: supervisor::REPLACED_REASON.into(),
    };
    conn.ws
        .send(Message::Close(Some(close)))
        .await
        .expect("close");
    expect_lost(&mut events, "took over").await;
    assert!(!link.is_connected());
}

#[tokio::test]
async fn giving_up_reconnecting_loses_the_link() {
    let options = LinkOptions {
        reconnect_window: Duration::from_millis(300),
        ..quick()
    };
    let (mut server, link, mut events, mut conn) = linked(options).await;
    start_session(&link, &mut conn).await;
    server.stop_listening().await;
    drop(conn);
    assert_eq!(next_event(&mut events).await, LinkEvent::Disconnected);
    expect_lost(&mut events, "within 300ms").await;
    refused(&link, action::CANCEL, &Empty {}).await;
}

#[tokio::test]
async fn shutdown_while_reconnecting_stops_for_good() {
    let (mut server, link, mut events, conn) = started().await;
    server.stop_listening().await;
    drop(conn);
    assert_eq!(next_event(&mut events).await, LinkEvent::Disconnected);
    // The link is now retrying against a closed port within a 30 s window.
    tokio::time::timeout(WAIT, link.shutdown())
        .await
        .expect("shutdown returns promptly");
    // No Lost, no Reattached: the receiver just ends.
    expect_end(&mut events).await;
    assert!(!link.is_connected());
}
