//! `bench run --autovacuum`: the switch changes the server's setting for the run and puts back
//! exactly what it found.

use bench::pg::{settings, AutovacuumMode, AutovacuumSwitch};

async fn show(pool: &sqlx::PgPool) -> String {
    // A fresh session: a reload reaches sessions between statements, new ones at once.
    let mut conn = pool.acquire().await.unwrap();
    let v: String = sqlx::query_scalar("SHOW autovacuum")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    conn.detach();
    v
}

#[tokio::test]
async fn the_switch_applies_the_mode_and_restores_what_it_found() {
    let pool = sqlx::PgPool::connect(&testkit::pg::resolved_url().await)
        .await
        .unwrap();
    let found = show(&pool).await;
    let other = if found == "on" {
        AutovacuumMode::Off
    } else {
        AutovacuumMode::On
    };
    let switch = AutovacuumSwitch::apply(&pool, other).await.unwrap();
    let changed = show(&pool).await;
    let measured = settings(&pool).await.unwrap();
    switch.restore(&pool).await;
    let back = show(&pool).await;
    assert_ne!(
        changed, found,
        "the switch changed nothing: {}",
        measured.autovacuum_note
    );
    assert_eq!(measured.autovacuum, changed);
    assert_eq!(measured.autovacuum_warning().is_some(), changed == "off");
    assert_eq!(
        back, found,
        "the switch did not restore the server's setting"
    );
    // As found: nothing changes, and the note says so.
    let switch = AutovacuumSwitch::apply(&pool, AutovacuumMode::AsFound)
        .await
        .unwrap();
    assert!(switch.note.contains("as found"), "{}", switch.note);
    switch.restore(&pool).await;
    assert_eq!(show(&pool).await, found);
}
