"""Stack traces and fixes for the technical-chat generator (:mod:`quipu.evals.tech_corpus`):
per language, the errors a developer pastes (the trace's last lines, over the app's table,
field, entity and port) and the cause and fix an assistant answers with. Plain templating."""

from __future__ import annotations

from dataclasses import dataclass

from quipu.evals.tech_code import Stack

__all__ = ["ErrorFamily", "errors_for", "fill", "trace"]


@dataclass(frozen=True)
class ErrorFamily:
    exception: str
    """The last line(s) of the trace, over {table}, {field}, {entity}, {port}."""
    short: str
    """How a question names it when it quotes the error."""
    action: str
    """What the developer was doing: "creating a recipe" (over {noun})."""
    cause: str
    fix: str
    """Code, in the stack's language."""
    paraphrase: str
    """The error in other words, for questions that do not quote it."""


_PY_ERRORS = (
    ErrorFamily(
        "sqlalchemy.exc.IntegrityError: (psycopg2.errors.UniqueViolation) duplicate key value "
        'violates unique constraint "{table}_{field}_key"\nDETAIL:  Key ({field})=(demo) '
        "already exists.",
        "UniqueViolation on {table}_{field}_key",
        "saving a second {noun} with the same {field}",
        "The insert hits the unique constraint on {field}; nothing checks for an existing row "
        "first, so the database refuses and the request dies with a 500.",
        "try:\n    db.session.commit()\nexcept IntegrityError:\n    db.session.rollback()\n"
        '    return jsonify(error="{field} already taken"), 409',
        "the duplicate {field} crash",
    ),
    ErrorFamily(
        "AttributeError: 'NoneType' object has no attribute '{field}'",
        "AttributeError 'NoneType' object has no attribute '{field}'",
        "opening a {noun} that was deleted",
        "The lookup returns None for an id that no longer exists, and the view reads .{field} "
        "on it anyway.",
        "row = db.session.get({entity}, row_id)\nif row is None:\n    abort(404)",
        "the crash on a missing {noun}",
    ),
    ErrorFamily(
        "TypeError: Object of type Decimal is not JSON serializable",
        "Decimal is not JSON serializable",
        "returning {table} from the API",
        "The {field} column comes back from the database as a Decimal, which the standard JSON "
        "encoder does not know.",
        "class AppJSONProvider(DefaultJSONProvider):\n    @staticmethod\n"
        "    def default(o):\n        if isinstance(o, Decimal):\n            return str(o)\n"
        "        return DefaultJSONProvider.default(o)",
        "the serialisation failure on the {field} values",
    ),
    ErrorFamily(
        "sqlalchemy.exc.OperationalError: (psycopg2.OperationalError) connection to server at "
        '"localhost" (127.0.0.1), port {port} failed: Connection refused',
        "Connection refused on port {port}",
        "starting the app after a reboot",
        "The Postgres container was not running, and the app points at port {port} where "
        "nothing listens.",
        "docker compose up -d db\ndocker compose ps   # wait for db to be healthy",
        "the database connection failure at startup",
    ),
    ErrorFamily(
        "ImportError: cannot import name '{entity}' from partially initialized module "
        "'app.models' (most likely due to a circular import)",
        "circular import of {entity}",
        "adding the {noun} routes",
        "app.models imports the routes module to register signals while the routes import "
        "{entity} from app.models: a circular import.",
        "def create_app():\n    app = Flask(__name__)\n    from app.routes import bp  # "
        "import inside the factory\n    app.register_blueprint(bp)\n    return app",
        "the import loop between models and routes",
    ),
)

_TS_ERRORS = (
    ErrorFamily(
        "TypeError: Cannot read properties of undefined (reading '{field}')",
        "Cannot read properties of undefined (reading '{field}')",
        "submitting the {noun} form",
        "req.body is undefined because no JSON body parser runs before the router.",
        'app.use(express.json({ limit: "1mb" }));\napp.use("/api", router);',
        "the undefined body crash on the {noun} form",
    ),
    ErrorFamily(
        "PrismaClientKnownRequestError: Unique constraint failed on the fields: (`{field}`)\n"
        "  code: 'P2002'",
        "P2002 unique constraint on {field}",
        "saving a second {noun} with the same {field}",
        "A {noun} with that {field} exists already and the handler does not catch Prisma's "
        "P2002, so Express answers 500.",
        'if (err instanceof Prisma.PrismaClientKnownRequestError && err.code === "P2002") {\n'
        '  return res.status(409).json({ error: "{field} already taken" });\n}',
        "the duplicate {field} crash",
    ),
    ErrorFamily(
        "Error: listen EADDRINUSE: address already in use :::{port}",
        "EADDRINUSE on port {port}",
        "restarting the dev server",
        "An old node process from the previous watch run still holds port {port}.",
        'lsof -i :{port}\nkill <pid>\n# and in server.ts: process.on("SIGTERM", () => '
        "server.close());",
        "the port conflict when restarting",
    ),
    ErrorFamily(
        "SyntaxError: Unexpected token '<', \"<!DOCTYPE \"... is not valid JSON",
        "Unexpected token '<' is not valid JSON",
        "loading the {noun} list in the frontend",
        "The fetch goes to the Vite dev server, which answers with index.html, because the "
        "/api proxy is missing.",
        'export default defineConfig({\n  server: { proxy: { "/api": '
        '"http://localhost:{port}" } },\n});',
        "the HTML-instead-of-JSON failure in the frontend",
    ),
)

_GO_ERRORS = (
    ErrorFamily(
        "panic: runtime error: invalid memory address or nil pointer dereference\n"
        "[signal SIGSEGV: segmentation violation code=0x1 addr=0x18 pc=0x6b2f3a]",
        "nil pointer dereference",
        "fetching a {noun} that does not exist",
        "The store returns a nil *{entity} and sql.ErrNoRows is ignored, so the handler "
        "dereferences nil.",
        "if errors.Is(err, sql.ErrNoRows) {\n\thttp.NotFound(w, r)\n\treturn\n}",
        "the crash on a missing {noun}",
    ),
    ErrorFamily(
        'ERROR: duplicate key value violates unique constraint "{table}_{field}_key" '
        "(SQLSTATE 23505)",
        "SQLSTATE 23505 on {table}_{field}_key",
        "saving a second {noun} with the same {field}",
        "The insert violates the unique index on {field} and the error goes straight to a 500.",
        'var pgErr *pgconn.PgError\nif errors.As(err, &pgErr) && pgErr.Code == "23505" {\n'
        '\thttp.Error(w, "{field} already taken", http.StatusConflict)\n\treturn\n}',
        "the duplicate {field} crash",
    ),
    ErrorFamily(
        'sql: Scan error on column index 3, name "{field}": converting NULL to string is '
        "unsupported",
        "converting NULL to string is unsupported",
        "listing {table} imported from the old spreadsheet",
        "Old rows have NULL in {field}, and the struct field is a plain string.",
        'type {entity} struct {\n\t{field_go} sql.NullString `db:"{field}"`\n}',
        "the NULL scan failure on old rows",
    ),
    ErrorFamily(
        "http: superfluous response.WriteHeader call from main.(*Server).create{entity} "
        "(handlers.go:88)",
        "superfluous response.WriteHeader call",
        "posting an invalid {noun}",
        "The validation branch writes an error but does not return, so the handler writes "
        "the status a second time.",
        "if err := validate.Struct(body); err != nil {\n"
        "\thttp.Error(w, err.Error(), http.StatusBadRequest)\n\treturn // this was missing\n}",
        "the double status write on invalid input",
    ),
)

_RUBY_ERRORS = (
    ErrorFamily(
        "NoMethodError (undefined method `{field}' for nil:NilClass)",
        "undefined method `{field}' for nil:NilClass",
        "opening a {noun} that was deleted",
        "find_by returns nil for the deleted record and the view calls .{field} on it.",
        "@record = {entity}.find(params[:id])  # raises RecordNotFound -> 404",
        "the crash on a missing {noun}",
    ),
    ErrorFamily(
        "ActiveRecord::RecordNotUnique (PG::UniqueViolation: ERROR:  duplicate key value "
        'violates unique constraint "index_{table}_on_{field}")',
        "RecordNotUnique on index_{table}_on_{field}",
        "saving a second {noun} with the same {field}",
        "The unique index exists in the database but the model has no uniqueness validation.",
        "validates :{field}, presence: true, uniqueness: { case_sensitive: false }",
        "the duplicate {field} crash",
    ),
    ErrorFamily(
        "ActionController::ParameterMissing (param is missing or the value is empty: {field})",
        "ParameterMissing: {field}",
        "submitting the {noun} form from the React side",
        "The frontend sends the fields at the top level while the controller requires them "
        "nested under the model key.",
        "wrap_parameters format: [:json]",
        "the missing parameter error from the form",
    ),
    ErrorFamily(
        "ActiveRecord::PendingMigrationError: Migrations are pending. To resolve this issue, "
        "run: bin/rails db:migrate RAILS_ENV=development",
        "PendingMigrationError",
        "pulling the {noun} branch",
        "The branch adds a migration for {table} that has not been run locally.",
        "bin/rails db:migrate\nbin/rails db:test:prepare",
        "the pending migration error after pulling",
    ),
)

_ERRORS = {"python": _PY_ERRORS, "typescript": _TS_ERRORS, "go": _GO_ERRORS, "ruby": _RUBY_ERRORS}


def errors_for(stack: Stack) -> tuple[ErrorFamily, ...]:
    return _ERRORS[stack.language]


def fill(template: str, values: dict[str, str]) -> str:
    """``template`` with each ``{name}`` of ``values`` replaced (other braces left alone: the
    templates hold code)."""
    for name, value in values.items():
        template = template.replace(f"{{{name}}}", value)
    return template


def trace(stack: Stack, family: ErrorFamily, values: dict[str, str], line: int) -> str:
    """The stack trace as the developer pastes it."""
    exception = fill(family.exception, values)
    table = values["table"]
    if stack.language == "python":
        module = "views" if stack.key == "django" else "routes"
        return (
            "Traceback (most recent call last):\n"
            f'  File "/home/dev/project/app/{module}/{table}.py", line {line}, in '
            f"create_{table}\n    db.session.commit()\n"
            '  File "/home/dev/project/.venv/lib/python3.12/site-packages/sqlalchemy/orm/'
            f'session.py", line 1969, in commit\n    trans.commit(_to_root=True)\n{exception}'
        )
    if stack.language == "typescript":
        return (
            f"{exception}\n    at createHandler (/app/src/routes/{table}.ts:{line}:27)\n"
            "    at Layer.handle [as handle_request] (/app/node_modules/express/lib/router/"
            "layer.js:95:5)\n    at next (/app/node_modules/express/lib/router/route.js:149:13)"
        )
    if stack.language == "go":
        return (
            f"{exception}\n\ngoroutine 42 [running]:\nmain.(*Server).handle{values['entity']}"
            f"(0xc000124000, {{0x8b1e20, 0xc0001a8000}}, 0xc0001b2000)\n"
            f"\t/app/internal/http/{table}.go:{line} +0x3a\n"
            "net/http.HandlerFunc.ServeHTTP(...)\n\t/usr/local/go/src/net/http/server.go:2166"
        )
    return (
        f"{exception}\n\napp/controllers/{table}_controller.rb:{line}:in `show'\n"
        "actionpack (7.1.3) lib/action_controller/metal/basic_implicit_render.rb:6:in "
        "`send_action'"
    )
