"""What a study is: its spec and stored settings, its SQL storage and defaults, opening it and
naming its objectives."""
