//! The binary the test suite runs: hostknob's own `main` (src/main.rs) with
//! the test switches on (`hostknob::test_hooks`). Not installed: an example,
//! built by `cargo test` beside the tests. The suite links it as
//! `<release dir>/test-hooks/hostknob` (tests/suite/support/run.rs), so it
//! finds hostknob-jemalloc beside it and prints `hostknob` as its name.

#[path = "../src/main.rs"]
mod shipped;

fn main() {
    hostknob::test_hooks::enable();
    shipped::main();
}
