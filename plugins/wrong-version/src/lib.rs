//! Exports `sluice:connector/source@9.0.0`, a contract version no host supports.

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
