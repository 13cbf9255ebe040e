"""The `memlog` commands, one module each (option declarations, and the calls into memlog.engine.api and
memlog.render that make the command). memlog.cli assembles them into the typer app; common holds
what every command shares: the exit codes, the shared options, the error guard and the output."""
