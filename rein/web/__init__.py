"""rein's web surfaces, served together by `rein serve` (rein.web.app): the approvals inbox (rein.web.inbox), the
AG-UI endpoint (rein.web.agui) and what every surface goes through (sign-in: rein.web.auth)."""
