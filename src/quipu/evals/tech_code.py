"""Code for the technical-chat generator (:mod:`quipu.evals.tech_corpus`).

Six web stacks in four languages. For an entity of the app being built each stack renders its
model (ORM class, schema or migration), a route handler and a test; for a helper function its
definition. Plain string templating: no randomness here (the generator chooses). Stack traces
and fixes are in :mod:`quipu.evals.tech_errors`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "STACKS",
    "Entity",
    "Field",
    "Helper",
    "Stack",
    "helper_code",
    "identifier",
    "model_code",
    "route_code",
    "test_code",
]


@dataclass(frozen=True)
class Field:
    name: str
    """snake_case."""
    kind: str
    """str, text, int, money (integer cents), decimal, date, datetime, bool, or fk:<table>."""


@dataclass(frozen=True)
class Entity:
    name: str
    """CamelCase class name."""
    table: str
    fields: tuple[Field, ...]

    @property
    def noun(self) -> str:
        """The entity in words: ``WateringLog`` -> ``watering log``."""
        out = "".join(f" {c.lower()}" if c.isupper() else c for c in self.name)
        return out.strip()


@dataclass(frozen=True)
class Helper:
    words: tuple[str, ...]
    """The function name's words: ``("scale", "quantity")``."""
    args: tuple[str, ...]
    """snake_case argument names."""
    guard: str
    """Condition over ``{arg}`` placeholders, valid in every language (``==``, ``<=``)."""
    edge_value: str
    main_value: str
    """Expressions over ``{arg}`` placeholders (``+ - * /`` and literals only)."""
    purpose: str
    edge: str
    """The guard in words, as a question asks it: "the recipe's base servings is zero"."""
    edge_result: str


@dataclass(frozen=True)
class Stack:
    key: str
    name: str
    language: str
    """python, typescript, go or ruby: picks the identifier style, traces and errors."""
    fence: str
    model_fence: str
    packages: tuple[tuple[str, str], ...]
    """(package, what it is added for): the libraries a chat adds over its sessions."""
    run: str
    """How the developer starts the app."""
    migrate: str
    """The commands that create a table from a new model ({table})."""


STACKS: tuple[Stack, ...] = (
    Stack(
        "flask",
        "Flask with SQLAlchemy and PostgreSQL",
        "python",
        "python",
        "python",
        (
            ("flask-limiter", "rate limiting the login endpoint"),
            ("flask-migrate", "database migrations with Alembic"),
            ("marshmallow", "validating request bodies"),
            ("flask-cors", "letting the frontend on another port call the API"),
            ("rq", "sending emails in the background"),
        ),
        "flask --app app run --debug",
        'flask db migrate -m "add {table}"\nflask db upgrade',
    ),
    Stack(
        "django",
        "Django with Django REST framework",
        "python",
        "python",
        "python",
        (
            ("django-filter", "filtering list endpoints by query parameters"),
            ("celery", "running the reminder jobs in the background"),
            ("django-environ", "reading settings from a .env file"),
            ("whitenoise", "serving static files in production"),
            ("drf-spectacular", "generating the OpenAPI schema"),
        ),
        "python manage.py runserver",
        "python manage.py makemigrations\npython manage.py migrate",
    ),
    Stack(
        "fastapi",
        "FastAPI with SQLModel and Alembic",
        "python",
        "python",
        "python",
        (
            ("alembic", "schema migrations"),
            ("httpx", "calling the payment provider's API"),
            ("slowapi", "rate limiting"),
            ("python-multipart", "accepting file uploads"),
            ("arq", "background jobs on Redis"),
        ),
        "uvicorn app.main:app --reload",
        'alembic revision --autogenerate -m "add {table}"\nalembic upgrade head',
    ),
    Stack(
        "express",
        "Express in TypeScript with Prisma",
        "typescript",
        "typescript",
        "prisma",
        (
            ("zod", "validating request bodies"),
            ("express-rate-limit", "rate limiting the auth routes"),
            ("bullmq", "queueing emails on Redis"),
            ("helmet", "setting security headers"),
            ("pino", "structured logging"),
        ),
        "npm run dev",
        "npx prisma migrate dev --name add_{table}",
    ),
    Stack(
        "go",
        "Go with chi and sqlx on PostgreSQL",
        "go",
        "go",
        "go",
        (
            ("github.com/go-chi/httprate", "rate limiting"),
            ("github.com/pressly/goose", "running SQL migrations"),
            ("github.com/go-playground/validator", "validating request structs"),
            ("github.com/rs/zerolog", "structured logging"),
            ("github.com/hibiken/asynq", "background jobs on Redis"),
        ),
        "go run ./cmd/server",
        'goose -dir migrations postgres "$DATABASE_URL" up',
    ),
    Stack(
        "rails",
        "Ruby on Rails with PostgreSQL",
        "ruby",
        "ruby",
        "ruby",
        (
            ("sidekiq", "background jobs"),
            ("pundit", "authorisation policies"),
            ("rack-attack", "throttling login attempts"),
            ("kaminari", "pagination"),
            ("rspec-rails", "the test suite"),
        ),
        "bin/rails server",
        "bin/rails db:migrate",
    ),
)


# --------------------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------------------


def _camel(words: tuple[str, ...] | list[str], upper: bool = False) -> str:
    head, *rest = words
    first = head.capitalize() if upper else head
    return first + "".join(word.capitalize() for word in rest)


def identifier(language: str, words: tuple[str, ...] | list[str], *, exported: bool = True) -> str:
    """A function or variable name in the language's style."""
    if language == "typescript":
        return _camel(words)
    if language == "go":
        return _camel(words, upper=exported)
    return "_".join(words)


def _arg(language: str, name: str) -> str:
    return identifier(language, name.split("_"), exported=False)


# --------------------------------------------------------------------------------------
# Models, routes, tests
# --------------------------------------------------------------------------------------

_SQLALCHEMY = {
    "str": "db.String(200), nullable=False",
    "text": "db.Text, nullable=True",
    "int": "db.Integer, nullable=False, default=0",
    "money": "db.Integer, nullable=False",
    "decimal": "db.Numeric(10, 2), nullable=False",
    "date": "db.Date, nullable=False",
    "datetime": "db.DateTime(timezone=True), nullable=False",
    "bool": "db.Boolean, nullable=False, default=False",
}
_DJANGO = {
    "str": "models.CharField(max_length=200)",
    "text": "models.TextField(blank=True)",
    "int": "models.IntegerField(default=0)",
    "money": "models.PositiveIntegerField()",
    "decimal": "models.DecimalField(max_digits=10, decimal_places=2)",
    "date": "models.DateField()",
    "datetime": "models.DateTimeField()",
    "bool": "models.BooleanField(default=False)",
}
_SQLMODEL = {
    "str": "str = Field(max_length=200)",
    "text": "str | None = None",
    "int": "int = 0",
    "money": "int",
    "decimal": "Decimal = Field(max_digits=10, decimal_places=2)",
    "date": "date",
    "datetime": "datetime",
    "bool": "bool = False",
}
_PRISMA = {
    "str": "String   @db.VarChar(200)",
    "text": "String?",
    "int": "Int      @default(0)",
    "money": "Int",
    "decimal": "Decimal  @db.Decimal(10, 2)",
    "date": "DateTime @db.Date",
    "datetime": "DateTime",
    "bool": "Boolean  @default(false)",
}
_GO = {
    "str": ("string", "VARCHAR(200) NOT NULL"),
    "text": ("sql.NullString", "TEXT"),
    "int": ("int", "INTEGER NOT NULL DEFAULT 0"),
    "money": ("int64", "BIGINT NOT NULL"),
    "decimal": ("decimal.Decimal", "NUMERIC(10, 2) NOT NULL"),
    "date": ("time.Time", "DATE NOT NULL"),
    "datetime": ("time.Time", "TIMESTAMPTZ NOT NULL"),
    "bool": ("bool", "BOOLEAN NOT NULL DEFAULT FALSE"),
}
_RAILS = {
    "str": "t.string :{name}, null: false, limit: 200",
    "text": "t.text :{name}",
    "int": "t.integer :{name}, null: false, default: 0",
    "money": "t.bigint :{name}, null: false",
    "decimal": "t.decimal :{name}, precision: 10, scale: 2, null: false",
    "date": "t.date :{name}, null: false",
    "datetime": "t.datetime :{name}, null: false",
    "bool": "t.boolean :{name}, null: false, default: false",
}


def _fk(field: Field) -> str | None:
    return field.kind.partition(":")[2] or None if field.kind.startswith("fk:") else None


def model_code(stack: Stack, entity: Entity) -> str:
    """The entity's model as the stack writes it (Go: struct plus its migration)."""
    lines: list[str] = []
    if stack.key == "flask":
        lines += [f"class {entity.name}(db.Model):", f'    __tablename__ = "{entity.table}"', ""]
        lines.append("    id = db.Column(db.Integer, primary_key=True)")
        for f in entity.fields:
            target = _fk(f)
            column = (
                f'db.Integer, db.ForeignKey("{target}.id"), nullable=False'
                if target
                else _SQLALCHEMY[f.kind]
            )
            lines.append(f"    {f.name} = db.Column({column})")
        lines.append(
            "    created_at = db.Column(db.DateTime(timezone=True), server_default=db.func.now())"
        )
    elif stack.key == "django":
        lines.append(f"class {entity.name}(models.Model):")
        for f in entity.fields:
            target = _fk(f)
            name = f.name.removesuffix("_id") if target else f.name
            column = (
                f'models.ForeignKey("{target}", on_delete=models.CASCADE, '
                f'related_name="{entity.table}")'
                if target
                else _DJANGO[f.kind]
            )
            lines.append(f"    {name} = {column}")
        lines += ["    created_at = models.DateTimeField(auto_now_add=True)", ""]
        lines += ["    class Meta:", '        ordering = ["-created_at"]']
    elif stack.key == "fastapi":
        lines.append(f"class {entity.name}(SQLModel, table=True):")
        lines.append("    id: int | None = Field(default=None, primary_key=True)")
        for f in entity.fields:
            target = _fk(f)
            column = f'int = Field(foreign_key="{target}.id")' if target else _SQLMODEL[f.kind]
            lines.append(f"    {f.name}: {column}")
    elif stack.key == "express":
        lines.append(f"model {entity.name} {{")
        lines.append("  id        Int      @id @default(autoincrement())")
        for f in entity.fields:
            target = _fk(f)
            name = _arg("typescript", f.name)
            lines.append(f"  {name:<9} {'Int' if target else _PRISMA[f.kind]}")
        lines += ["  createdAt DateTime @default(now())", "}"]
    elif stack.key == "go":
        lines.append(f"type {entity.name} struct {{")
        lines.append('\tID        int64     `db:"id" json:"id"`')
        for f in entity.fields:
            kind = "int64" if _fk(f) else _GO[f.kind][0]
            go_name = identifier("go", tuple(f.name.split("_")))
            lines.append(f'\t{go_name} {kind} `db:"{f.name}" json:"{f.name}"`')
        lines += ["}", "", f"-- migrations/003_create_{entity.table}.sql"]
        lines.append(f"CREATE TABLE {entity.table} (")
        columns = ["    id BIGSERIAL PRIMARY KEY"]
        for f in entity.fields:
            target = _fk(f)
            sql = f"BIGINT NOT NULL REFERENCES {target}(id)" if target else _GO[f.kind][1]
            columns.append(f"    {f.name} {sql}")
        lines += [",\n".join(columns), ");"]
    else:  # rails
        plural = identifier("go", tuple(entity.table.split("_")))
        lines += [f"class Create{plural} < ActiveRecord::Migration[7.1]", "  def change"]
        lines.append(f"    create_table :{entity.table} do |t|")
        for f in entity.fields:
            target = _fk(f)
            if target:
                name = f.name.removesuffix("_id")
                lines.append(f"      t.references :{name}, null: false, foreign_key: true")
            else:
                lines.append("      " + _RAILS[f.kind].format(name=f.name))
        lines += ["      t.timestamps", "    end", "  end", "end"]
    return "\n".join(lines)


def route_code(stack: Stack, entity: Entity) -> str:
    """A list-and-create handler for the entity."""
    table, name = entity.table, entity.name
    first = entity.fields[0].name
    if stack.key == "flask":
        return (
            f'@bp.route("/{table}", methods=["GET"])\n@login_required\ndef list_{table}():\n'
            f'    page = request.args.get("page", 1, type=int)\n'
            f"    rows = {name}.query.order_by({name}.created_at.desc()).paginate(page=page)\n"
            f"    return jsonify(items=[row.to_dict() for row in rows.items], page=page)\n\n\n"
            f'@bp.route("/{table}", methods=["POST"])\n@login_required\ndef create_{table}():\n'
            f"    data = {name}Schema().load(request.get_json())\n"
            f"    row = {name}(**data)\n    db.session.add(row)\n    db.session.commit()\n"
            f"    return jsonify(row.to_dict()), 201"
        )
    if stack.key == "django":
        return (
            f"class {name}ViewSet(viewsets.ModelViewSet):\n"
            f"    serializer_class = {name}Serializer\n"
            f"    permission_classes = [IsAuthenticated]\n"
            f'    filterset_fields = ["{first}"]\n\n'
            f"    def get_queryset(self):\n"
            f"        return {name}.objects.filter(owner=self.request.user)\n\n"
            f"    def perform_create(self, serializer):\n"
            f"        serializer.save(owner=self.request.user)"
        )
    if stack.key == "fastapi":
        return (
            f'@router.get("/{table}", response_model=list[{name}Read])\n'
            f"def list_{table}(session: SessionDep, offset: int = 0, limit: int = 20):\n"
            f"    return session.exec(select({name}).offset(offset).limit(limit)).all()\n\n\n"
            f'@router.post("/{table}", response_model={name}Read, status_code=201)\n'
            f"def create_{entity.table}(body: {name}Create, session: SessionDep):\n"
            f"    row = {name}.model_validate(body)\n"
            f"    session.add(row)\n    session.commit()\n    session.refresh(row)\n"
            f"    return row"
        )
    if stack.key == "express":
        model = _arg("typescript", entity.noun.replace(" ", "_"))
        return (
            f'router.get("/{table}", requireAuth, async (req, res) => {{\n'
            f"  const take = Number(req.query.limit ?? 20);\n"
            f"  const rows = await prisma.{model}.findMany({{ take, orderBy: {{ createdAt: "
            f'"desc" }} }});\n  res.json(rows);\n}});\n\n'
            f'router.post("/{table}", requireAuth, async (req, res) => {{\n'
            f"  const body = {model}Input.parse(req.body);\n"
            f"  const row = await prisma.{model}.create({{ data: body }});\n"
            f"  res.status(201).json(row);\n}});"
        )
    if stack.key == "go":
        return (
            f"func (s *Server) list{name}s(w http.ResponseWriter, r *http.Request) {{\n"
            f"\tvar rows []{name}\n"
            f'\tif err := s.db.SelectContext(r.Context(), &rows, "SELECT * FROM {table} '
            f'ORDER BY id DESC LIMIT 50"); err != nil {{\n'
            f"\t\thttp.Error(w, err.Error(), http.StatusInternalServerError)\n\t\treturn\n\t}}\n"
            f"\twriteJSON(w, http.StatusOK, rows)\n}}"
        )
    return (
        f"class {name}sController < ApplicationController\n"
        f"  before_action :authenticate_user!\n\n"
        f"  def index\n    @{table} = {name}.order(created_at: :desc).page(params[:page])\n"
        f"    render json: @{table}\n  end\n\n"
        f"  def create\n    @record = {name}.new({table.rstrip('s')}_params)\n"
        f"    if @record.save\n      render json: @record, status: :created\n"
        f"    else\n      render json: @record.errors, status: :unprocessable_entity\n"
        f"    end\n  end\nend"
    )


def test_code(stack: Stack, entity: Entity) -> str:
    """A test that creates the entity through the API."""
    table, first = entity.table, entity.fields[0].name
    if stack.language == "python":
        return (
            f"def test_create_{table}_returns_201(client, auth_headers):\n"
            f'    response = client.post("/{table}", json={{"{first}": "example"}}, '
            f"headers=auth_headers)\n"
            f"    assert response.status_code == 201\n"
            f'    assert response.json()["{first}"] == "example"'
        )
    if stack.language == "typescript":
        return (
            f'describe("POST /{table}", () => {{\n'
            f'  it("creates a {entity.noun}", async () => {{\n'
            f'    const res = await request(app).post("/{table}").set(authHeader)'
            f'.send({{ {_arg("typescript", first)}: "example" }});\n'
            f"    expect(res.status).toBe(201);\n  }});\n}});"
        )
    if stack.language == "go":
        return (
            f"func TestCreate{entity.name}(t *testing.T) {{\n"
            f"\tsrv := newTestServer(t)\n"
            f'\tres := srv.post(t, "/{table}", `{{"{first}": "example"}}`)\n'
            f"\tif res.StatusCode != http.StatusCreated {{\n"
            f'\t\tt.Fatalf("status %d", res.StatusCode)\n\t}}\n}}'
        )
    return (
        f'RSpec.describe "{entity.name}s API", type: :request do\n'
        f'  it "creates a {entity.noun}" do\n'
        f'    post "/{table}", params: {{ {first}: "example" }}, headers: auth_headers\n'
        f"    expect(response).to have_http_status(:created)\n  end\nend"
    )


def helper_code(stack: Stack, helper: Helper) -> str:
    """The helper's definition in the stack's language."""
    lang = stack.language
    names = {arg: _arg(lang, arg) for arg in helper.args}
    guard = helper.guard.format(**names)
    edge = helper.edge_value.format(**names)
    main = helper.main_value.format(**names)
    name = identifier(lang, helper.words)
    if lang == "python":
        return (
            f"def {name}({', '.join(names.values())}):\n"
            f'    """{helper.purpose.capitalize()}."""\n'
            f"    if {guard}:\n        return {edge}\n    return {main}"
        )
    if lang == "typescript":
        params = ", ".join(f"{n}: number" for n in names.values())
        return (
            f"// {helper.purpose}\nexport function {name}({params}): number {{\n"
            f"  if ({guard}) {{\n    return {edge};\n  }}\n  return {main};\n}}"
        )
    if lang == "go":
        params = ", ".join(names.values())
        return (
            f"// {name} {helper.purpose}.\nfunc {name}({params} float64) float64 {{\n"
            f"\tif {guard} {{\n\t\treturn {edge}\n\t}}\n\treturn {main}\n}}"
        )
    return (
        f"# {helper.purpose.capitalize()}.\ndef {name}({', '.join(names.values())})\n"
        f"  return {edge} if {guard}\n\n  {main}\nend"
    )
