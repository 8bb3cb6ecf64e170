//! Reading the options of `ferrymq-bench cph` and `ferrymq-bench report`: each is a clap `Args`
//! struct that the `ferrymq-bench` command tree includes (for its help) and that the benchmark
//! parses its arguments with, so both read the same definition.

use clap::{Args, FromArgMatches};

/// Parses `argv` (the arguments after `bin`, e.g. after `ferrymq-bench report ha`) into `T`. The
/// error is clap's message (help included, for `--help`).
pub fn parse_args<T: Args + FromArgMatches>(
    bin: &'static str,
    argv: &[String],
) -> Result<T, String> {
    let cmd = T::augment_args(clap::Command::new(bin))
        .no_binary_name(true)
        .bin_name(bin);
    let m = cmd
        .try_get_matches_from(argv)
        .map_err(|e| e.to_string().trim_end().to_string())?;
    T::from_arg_matches(&m).map_err(|e| e.to_string().trim_end().to_string())
}
