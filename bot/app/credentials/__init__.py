"""The App's credentials: `files.py` (the environment and the work directory's file) and `stored.py`
(sealed in the shared database with BEAM_SECRET_KEY, for several hosts). May import `settings`,
`jobs` and `bot.beam`; `web` and `assembly` import it."""
