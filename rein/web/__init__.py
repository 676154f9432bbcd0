"""rein's web surfaces, served together by `rein serve` (rein.web.app): the approvals inbox (rein.web.inbox), the
AG-UI endpoint (rein.web.agui) and what every surface goes through (rein.web.guard: hosts, origins, content types,
sizes, security headers; sign-in: rein.web.auth and rein.web.tokens)."""
