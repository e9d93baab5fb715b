use anyhow::Result;
use clap::{Args, CommandFactory};
use clap_complete::Shell;

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  hostknob completions bash > /etc/bash_completion.d/hostknob\n  \
hostknob completions zsh > \"${fpath[1]}/_hostknob\"\n  hostknob completions fish > ~/.config/fish/completions/hostknob.fish"
)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: Shell,
}

pub fn run(args: &CompletionsArgs) -> Result<i32> {
    let mut cmd = crate::cli::Cli::command();
    clap_complete::generate(args.shell, &mut cmd, "hostknob", &mut std::io::stdout());
    Ok(0)
}
