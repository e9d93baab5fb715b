use super::*;

fn when(yaml: &str) -> Result<When, FieldError> {
    When::parse("when", &serde_yaml::from_str(yaml).unwrap())
}

/// The one condition of `yaml` against a host value.
fn holds(yaml: &str, host: Value) -> bool {
    let w = when(yaml).unwrap_or_else(|e| panic!("{yaml}: {}: {}", e.field, e.message));
    w.conditions[0].tests.iter().any(|t| test_holds(t, &host))
}

fn rel(r: &str) -> Value {
    Value::Release(r.into(), crate::inventory::facts::release_numbers(r))
}

#[test]
fn kernel_releases_compare_as_numbers_not_text() {
    assert!(holds("kernel: '>6.9'", rel("6.18.44-fc-v595")));
    assert!(holds("kernel: '>=6.1'", rel("6.18.44")));
    assert!(!holds("kernel: '<6.9'", rel("6.18.44")));
    assert!(holds("kernel: '>=6.1'", rel("6.1.0-13-amd64")));
    assert!(!holds("kernel: '>=6.1'", rel("6.0.19")));
    assert!(!holds("kernel: '>=6.1'", rel("5.15.0")));
    assert!(holds("kernel: '<6.1'", rel("5.15.0")));
    assert!(holds("kernel: '>=5.14.0'", rel("5.14.0-427.el9.x86_64")));
    assert!(!holds("kernel: '>5.14.0'", rel("5.14.0-427.el9.x86_64")));
}

#[test]
fn a_short_release_names_the_whole_series() {
    assert!(holds("kernel: '6.1'", rel("6.1.55")));
    assert!(holds("kernel: '==6.1'", rel("6.1.0")));
    assert!(!holds("kernel: '6.1'", rel("6.10.2")));
    assert!(!holds("kernel: '>6.1'", rel("6.1.99")));
    assert!(holds("kernel: '>6.1'", rel("6.2.0")));
    assert!(holds("kernel: '<=6.1'", rel("6.1.99")));
    assert!(holds("kernel: '6'", rel("6.18.44")));
    assert!(holds("kernel: '>=6.1.50'", rel("6.1.55")));
    assert!(!holds("kernel: '>=6.1.60'", rel("6.1.55")));
    // A release without numbers never compares.
    assert!(!holds("kernel: '>=1'", rel("linux")));
    assert!(!holds(
        "kernel: '!=6.1'",
        Value::Unknown("unknown (no file)".into())
    ));
}

#[test]
fn kernel_written_as_a_yaml_number_is_refused_where_it_would_lose_a_zero() {
    let e = when("kernel: 6.10").unwrap_err();
    assert_eq!(e.field, "when.kernel");
    assert!(e.message.contains("as a string"), "{}", e.message);
    assert!(holds("kernel: 6", rel("6.18.44")));
    let e = when("kernel: '>=6.x'").unwrap_err();
    assert!(e.message.contains("numbers with dots"), "{}", e.message);
}

#[test]
fn memory_sizes_with_units() {
    let gib = |n: u64| Value::Bytes(n << 30);
    assert!(holds("memory: '>=64GiB'", gib(128)));
    assert!(!holds("memory: '>=64GiB'", Value::Bytes((64 << 30) - 1)));
    assert!(holds("memory: '<1.5TiB'", gib(1024)));
    assert!(holds("memory: '>=64GB'", Value::Bytes(64_000_000_000)));
    assert!(holds("memory: '>512 MiB'", gib(1)));
    let e = when("memory: '>=64G'").unwrap_err();
    assert!(e.message.contains("GiB"), "{}", e.message);
    assert!(when("memory: 65536").is_err());
}

#[test]
fn numbers_models_and_names() {
    let spr = Value::Model(0x8f, Some("SAPPHIRERAPIDS_X"));
    assert!(holds("model: 143", spr.clone()));
    assert!(holds("model: 0x8f", spr.clone()));
    assert!(holds("model: '>=0x8f'", spr.clone()));
    assert!(holds("model: sapphirerapids", spr.clone()));
    assert!(holds("model: SAPPHIRERAPIDS_X", spr.clone()));
    assert!(!holds("model: emeraldrapids", spr.clone()));
    assert!(holds("model: '!=emeraldrapids'", spr));
    assert!(!holds("model: sapphirerapids", Value::Model(0x11, None)));
    let e = when("model: sapphirerapid").unwrap_err();
    assert!(
        e.message.contains("did you mean \"sapphirerapids\""),
        "{}",
        e.message
    );
    let e = when("model: '>sapphirerapids'").unwrap_err();
    assert!(e.message.contains("== or !="), "{}", e.message);
    assert!(holds("family: 0x19", Value::Number(25)));
    assert!(holds("numa_nodes: '>1'", Value::Number(2)));
    assert!(!holds("numa_nodes: '>1'", Value::Number(1)));
    assert!(when("numa_nodes: many").is_err());
    assert!(holds("isolated_cpus: '>0'", Value::Number(4)));
    assert!(!holds("isolated_cpus: '>0'", Value::Number(0)));
    assert!(when("isolated_cpus: some").is_err());
}

#[test]
fn names_compare_as_written_with_vendor_and_arch_aliases() {
    let t = |s: &str| Value::Text(s.into());
    assert!(holds("idle_driver: intel_idle", t("intel_idle")));
    assert!(!holds("idle_driver: intel_idle", t("haltpoll")));
    assert!(holds("idle_driver: '!=haltpoll'", t("intel_idle")));
    assert!(holds(
        "idle_driver: [intel_idle, acpi_idle]",
        t("acpi_idle")
    ));
    assert!(!holds("idle_driver: Intel_Idle", t("intel_idle")));
    assert!(holds("vendor: intel", t("GenuineIntel")));
    assert!(holds("vendor: AuthenticAMD", t("AuthenticAMD")));
    assert!(!holds("vendor: intel", t("AuthenticAMD")));
    assert!(holds("arch: x86_64", t("x86")));
    assert!(holds("arch: aarch64", t("arm64")));
    assert!(holds("label.role: rpc", t("rpc")));
    assert!(holds("label.rack: 12", t("12")));
    assert!(holds("hybrid: true", Value::Bool(true)));
    assert!(holds("virtualized: '!=true'", Value::Bool(false)));
    let e = when("idle_driver: '>=intel_idle'").unwrap_err();
    assert!(e.message.contains("== or !="), "{}", e.message);
    assert!(when("hybrid: maybe").is_err());
}

#[test]
fn conditions_read_as_sentences() {
    let w = when("{idle_driver: intel_idle, kernel: '>=6.1', vendor: [intel, amd], numa_nodes: ['<2', '>3']}")
        .unwrap();
    let s: Vec<String> = w.conditions.iter().map(|c| c.to_string()).collect();
    assert_eq!(
        s,
        [
            "idle_driver == intel_idle",
            "kernel >= 6.1",
            "vendor in [intel, amd]",
            "numa_nodes < 2 or numa_nodes > 3"
        ]
    );
}

#[test]
fn bad_shapes_and_unknown_facts_name_the_field() {
    let e = when("idle_drivr: intel_idle").unwrap_err();
    assert_eq!(e.field, "when.idle_drivr");
    assert!(
        e.message.contains("unknown fact `idle_drivr`"),
        "{}",
        e.message
    );
    assert!(
        e.message.contains("did you mean \"idle_driver\""),
        "{}",
        e.message
    );
    assert!(
        e.message
            .contains("numa_nodes, isolated_cpus, memory, label.KEY"),
        "{}",
        e.message
    );
    assert_eq!(when("[intel_idle]").unwrap_err().field, "when");
    assert_eq!(when("{}").unwrap_err().field, "when");
    assert_eq!(when("kernel: []").unwrap_err().field, "when.kernel");
    assert_eq!(
        when("kernel: ['>=6.1', '=>5']").unwrap_err().field,
        "when.kernel[1]"
    );
    let e = when("kernel: '>>6.1'").unwrap_err();
    assert!(e.message.contains("not a comparison"), "{}", e.message);
    assert!(when("kernel: '>='").is_err());
    assert!(when("'label.': x").is_err());
    assert!(when("label.role: {a: b}").is_err());
}
