//! Exports `sluice:connector/source@9.0.0`, a contract version no host supports; with the
//! `wrong-types` feature, `source@0.1.7` with a function of another type than the contract's.

#[cfg(not(feature = "wrong-types"))]
mod future {
    wit_bindgen::generate!({
        inline: "
            package sluice:connector@9.0.0;
            interface source {
                spec: func() -> string;
            }
            world future-connector {
                export source;
            }
        ",
    });

    struct Future;

    impl exports::sluice::connector::source::Guest for Future {
        fn spec() -> String {
            "{}".to_string()
        }
    }

    export!(Future);
}

/// Every function of the contract's `source`, `capabilities` with the wrong type: the host must
/// refuse it when it loads the plugin, before any instance calls it.
#[cfg(feature = "wrong-types")]
mod wrong_types {
    wit_bindgen::generate!({
        inline: "
            package sluice:connector@0.1.7;
            interface source {
                spec: func() -> string;
                capabilities: func(config: string) -> u32;
                check: func(config: string);
                discover: func(config: string);
                partitions: func(config: string);
                read-page: func(config: string);
            }
            world mistyped-connector {
                export source;
            }
        ",
    });

    struct Mistyped;

    impl exports::sluice::connector::source::Guest for Mistyped {
        fn spec() -> String {
            "{}".to_string()
        }
        fn capabilities(_: String) -> u32 {
            0
        }
        fn check(_: String) {}
        fn discover(_: String) {}
        fn partitions(_: String) {}
        fn read_page(_: String) {}
    }

    export!(Mistyped);
}
