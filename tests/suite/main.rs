//! hostknob's integration tests, one binary: each module is one area of the
//! tool, `support` what they share (the corpus, the one runner for the binary,
//! tree snapshots). The opt-in live tests are `tests/live.rs`.

mod support;

mod apply_corpus;
mod apply_crash;
mod apply_faults;
mod apply_journal;
mod apply_ledger;
mod audit_status;
mod cli;
mod doc;
mod doc_live_stable;
mod fleet_cli;
mod fleet_health;
mod fleet_k8s;
mod fleet_metrics;
mod fleet_observe;
mod fleet_report;
mod fleet_scale;
mod fleet_schemas;
mod hostile;
mod hostile_links;
mod housekeeping;
mod inventory_bad_input;
mod inventory_corpus;
mod inventory_gaps;
mod inventory_hwloc;
mod inventory_live;
mod inventory_msr;
mod inventory_sections;
mod inventory_sysinfo;
mod irq_affinity;
mod isolate;
mod isolate_plan;
mod kernel_cmdline;
mod kernel_rules;
mod kernel_rules_epp;
mod kernel_rules_review;
mod kernel_rules_thp;
mod manifest_bad;
mod manifest_kinds;
mod msr_knobs;
mod newcomer;
mod packaging;
mod persist;
mod persist_order;
mod platform_freq;
mod probe_idle_cpu;
mod probe_interrupt;
mod probe_latency;
mod probe_rss;
mod profiles;
mod readme_tour;
mod tables_width;
mod verify;
