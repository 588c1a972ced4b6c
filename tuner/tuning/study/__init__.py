"""What a study is: its spec, stored settings and records, its SQL storage and defaults."""
