"""The bottom of the console: what every app may import and that imports no app.

Roles, the HTMX partial-or-page helper, the strict environment readers and the guide's
knowledge (the failure taxonomy, which finding belongs to which category)."""
