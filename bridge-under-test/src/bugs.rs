//! Bug switches: a family's regressions as named boolean fields, default off. The names are the
//! ones MODEL.md fixes; the CLI's `--bug` and tokens use them verbatim.

/// Define a bug-switch struct whose fields are the switch names, with name-based access.
#[macro_export]
macro_rules! bug_switches {
    ($(#[$meta:meta])* $name:ident { $($(#[$fmeta:meta])* $field:ident),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
        #[serde(default, deny_unknown_fields)]
        pub struct $name { $($(#[$fmeta])* pub $field: bool,)* }

        impl $name {
            /// Every switch name, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$(stringify!($field)),*];

            /// Turn on the switch called `name`; `Err` names the valid switches.
            pub fn enable(&mut self, name: &str) -> Result<(), String> {
                match name {
                    $(stringify!($field) => self.$field = true,)*
                    _ => return Err(format!(
                        "unknown bug switch `{name}`; valid: {}", Self::NAMES.join(" "))),
                }
                Ok(())
            }

            /// The names of the switches that are on, in declaration order.
            pub fn enabled(&self) -> Vec<&'static str> {
                let mut on = Vec::new();
                $(if self.$field { on.push(stringify!($field)); })*
                on
            }
        }
    };
}
