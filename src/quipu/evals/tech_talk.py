"""What the technical-chat generator's developers talk about between the planted events
(:mod:`quipu.evals.tech_corpus`): everyday development questions with long answers, questions
about one entity and field of the app, and the paragraphs an assistant appends. Written for
this eval; plain data."""

from __future__ import annotations

__all__ = ["ENTITY_FILLERS", "FILLERS", "TAILS"]

FILLERS: tuple[tuple[str, str], ...] = (
    ("What's the practical difference between PUT and PATCH again?",
     "PUT replaces the whole resource with what you send: fields you leave out are reset or "
     "rejected, so the client has to send the complete representation. PATCH sends only the "
     "changes. In practice most JSON APIs use PATCH for edits from forms, because the form "
     "rarely holds every field, and keep PUT for cases where the client really owns the whole "
     "document. Whichever you pick, make it idempotent where you can and document which "
     "fields are writable. A common trap is letting PATCH set fields that should only be set "
     "by the server, such as owner ids or timestamps, so keep an explicit allow-list."),
    ("How should I name my git branches for this project?",
     "Keep it boring and searchable: a type prefix, an optional ticket number and a short "
     "slug, for example feature/42-export-csv or fix/login-redirect. Short-lived branches "
     "that merge within a day or two avoid most conflicts. Delete them after merging so the "
     "list stays readable, and protect the main branch so every change goes through a pull "
     "request with the tests green."),
    ("Is it worth writing tests for the HTML templates?",
     "Usually not line by line. Test the behaviour that matters: that a page renders with "
     "status 200 for a logged-in user, that it redirects anonymous users, and that the key "
     "piece of data shows up. Snapshot tests of whole pages break on every design tweak and "
     "people learn to update them blindly. Put the logic in functions you can unit test and "
     "keep templates thin."),
    ("Should I squash my commits before merging?",
     "For a feature branch with many work-in-progress commits, squashing gives a clean main "
     "history where one commit is one change you can revert. Keep separate commits when they "
     "are meaningful on their own, such as a refactor followed by the feature that needed "
     "it. The important part is that each commit on main builds and passes the tests."),
    ("What's a sensible folder structure as the project grows?",
     "Group by feature rather than by type once you have more than a handful of modules: "
     "each feature folder holds its routes, models, services and tests. Shared code such as "
     "the database session, configuration and authentication lives in a core package. Avoid "
     "a utils module that becomes a junk drawer; give helpers a home next to the code that "
     "uses them and move them up only when a second feature needs them."),
    ("How do I keep my local environment in sync with production?",
     "Pin your runtime and dependency versions, run the same database engine and major "
     "version locally as in production (a container makes this easy), and keep configuration "
     "in environment variables with a checked-in example file listing every name. Run your "
     "migrations the same way in both places and seed realistic data for local testing."),
    ("Any tips for writing a good pull request description?",
     "Say why the change is needed first, then what it does, then how you tested it. Link "
     "the issue. Call out anything risky: migrations, changes to public endpoints, new "
     "settings. Screenshots help for UI work. Keep the PR small enough that a reviewer can "
     "read it in one sitting; split mechanical renames from behaviour changes."),
    ("What's the difference between authentication and authorization here?",
     "Authentication answers who the caller is: the login, the session or the token. "
     "Authorization answers what that caller may do: whether this user may edit this record. "
     "Keep them separate in the code. A decorator or middleware establishes the user, and "
     "each handler or a policy layer checks permissions on the specific object, so that a "
     "logged-in user cannot read another user's data by changing an id in the URL."),
    ("How often should I run database backups for a small app?",
     "Daily automated backups with a retention of a week or two is a reasonable start, plus "
     "point-in-time recovery if your host offers it. More important than frequency is "
     "testing a restore: schedule a restore into a scratch database once a month and check "
     "that the row counts and a few records look right."),
    ("How do I stop my API from returning 500s on bad input?",
     "Validate at the edge: parse every request body into a schema that rejects unknown or "
     "malformed fields with a 400 or 422 and a message saying which field is wrong. Convert "
     "known exceptions such as not-found or conflict into their status codes in one error "
     "handler. Anything that still becomes a 500 is a bug worth a test."),
    ("Should I use an ORM or write SQL by hand?",
     "An ORM pays off for the everyday create, read, update and delete work and for keeping "
     "the schema in migrations. Drop to SQL for reports and anything where you need to see "
     "the query plan. Most projects end up with both, and that is fine as long as the raw "
     "queries live in one place and are tested against a real database."),
    ("What should go into the README?",
     "How to run the project locally in a few commands, how to run the tests, what the "
     "environment variables mean, and how to deploy. A short architecture overview helps "
     "new contributors. Keep it current by updating it in the same pull request that "
     "changes the setup."),
    ("How do I handle time zones for users in different countries?",
     "Store instants in UTC, keep the user's time zone as a setting, and convert only when "
     "displaying or when interpreting a local time the user typed. Dates without a time, "
     "such as a birthday or a due date, are not instants: store them as plain dates. Test "
     "the daylight saving switch explicitly."),
    ("Do I need a message queue already?",
     "Not until something is too slow or too unreliable to do inside the request: sending "
     "emails, generating exports, calling flaky third-party APIs. Then a simple job queue "
     "on Redis or the database is enough. Make every job safe to run twice, because retries "
     "will happen."),
    ("How do I make the CI pipeline faster?",
     "Cache the dependency installs keyed by the lock file, run linting and tests in "
     "parallel jobs, and only build the container image on the main branch. Split slow "
     "integration tests from fast unit tests so most feedback arrives in a couple of "
     "minutes. Measure before optimising: the slowest step is often a single test."),
    ("What logging should a small web app have?",
     "One line per request with the method, path, status, duration and a request id; "
     "warnings for handled problems; errors with stack traces for unhandled ones. Log in "
     "JSON if anything will parse it. Never log passwords, tokens or full card numbers, "
     "and be careful with request bodies."),
    ("How do I structure environment-specific settings?",
     "Read everything from environment variables at startup into one settings object with "
     "defaults for development. Production sets the variables through the host. Avoid "
     "separate settings files per environment that drift apart, and fail fast at startup "
     "when a required variable is missing."),
    ("What's the best way to seed test data?",
     "Use factories that build valid objects with sensible defaults and let each test "
     "override what it cares about. Keep fixtures small and local to the tests that use "
     "them. For manual testing, a seed command that creates a few users and realistic "
     "records saves a lot of clicking."),
    ("Should I add TypeScript or type hints now or later?",
     "Earlier is cheaper. Type the boundaries first: request and response shapes, database "
     "models and the functions other modules call. Turn on strict checking for new files "
     "and tighten older ones as you touch them. The checker catches a lot of the None and "
     "undefined bugs before they reach production."),
    ("How do I avoid N+1 queries on the list pages?",
     "Load related rows in the same query or in one extra query for the whole page, using "
     "the ORM's eager-loading option (joined or select-in loading). Turn on query logging "
     "in development and watch the count on a list page with twenty items: it should be a "
     "small constant, not twenty-one."),
    ("What's a reasonable approach to API versioning?",
     "Put the major version in the path, such as /v1, and avoid breaking changes inside a "
     "version: add fields, never rename or remove them. When you must break something, run "
     "both versions side by side for a while and tell clients when the old one goes away."),
    ("How do I debug something that only fails in production?",
     "Start from the logs and the request id of a failing request, reproduce with the same "
     "input locally, and compare configuration between the environments. Add temporary "
     "logging around the suspect code if needed. Differences in data, environment variables "
     "and dependency versions explain most of these."),
    ("Should I write the frontend as a single-page app?",
     "Only if the interactions need it. Server-rendered pages with a little JavaScript are "
     "faster to build and easier to keep accessible. A single-page app makes sense for "
     "dashboards with lots of client state. You can also start server-rendered and add "
     "interactive islands where they pay off."),
    ("What should I monitor once the app is live?",
     "Uptime from outside, error rate and latency of the main endpoints, database "
     "connections and disk space, and the queue length if you have background jobs. Alert "
     "on symptoms users feel, not on every metric, or people will start ignoring alerts."),
)  # fmt: skip


#: Everyday questions about one entity and field of the app ({table}, {field}, {noun},
#: {entity}): they name what the code questions name without answering them.
ENTITY_FILLERS: tuple[tuple[str, str], ...] = (
    ("Should the {table} table have an index on {field}?",
     "An index on {field} pays off when the list pages filter or sort {table} by it. With a "
     "few thousand rows the planner may still choose a sequential scan, so check the list "
     "query with EXPLAIN ANALYZE before and after. A unique constraint creates its own index, "
     "so you would not add a second one on the same column."),
    ("How would you validate {field} on a {noun}?",
     "Check it where the request enters the app: required or optional, type, length or "
     "range, and a clear message naming {field} when it is wrong. Keep a database constraint "
     "behind it as the last line of defence, because scripts and admin tools bypass the API."),
    ("What's the easiest way to seed some fake {table} for local testing?",
     "A small seed command with a factory for {entity}: generate fifty rows with realistic "
     "values for {field} and the other columns, and make it safe to run twice by clearing the "
     "table first. Keep it out of the production deploy."),
    ("Can the {noun} list be sorted by {field} from the frontend?",
     "Yes: accept a sort parameter, map it onto an allow-list of columns that includes {field}, "
     "and never paste the raw value into the SQL. Add a stable tie-breaker such as the id so "
     "pages do not shuffle between requests."),
    ("How should {field} appear in the JSON we return for {table}?",
     "Pick one convention and keep it everywhere. If the frontend is JavaScript, camelCase keys "
     "are common; the serializer can rename {field} on the way out. Document the format of "
     "dates and money, and never return internal columns by accident."),
    ("Is it worth caching the {noun} list?",
     "Not yet. Measure the endpoint first; a list of {table} with an index and a page size is "
     "usually fast. If it becomes hot, cache per user for a short time and clear the cache "
     "when a row changes."),
    ("How do I rename the {field} column later without downtime?",
     "In steps: add the new column, write to both, backfill the old rows, switch the reads, "
     "and only then drop {field}. Each step is its own deploy, so the running code always "
     "matches the schema."),
    ("Should {table} rows ever be edited by the admin directly in the database?",
     "Avoid it. Give the admin a small screen or a script that goes through the same "
     "validation as the API, so a typo in {field} cannot leave a row the app cannot read. "
     "Log who changed what."),
)  # fmt: skip


#: Paragraphs an assistant appends to a longer answer (zero to two of them, at random).
TAILS: tuple[str, ...] = (
    "If you want, I can also sketch the tests for this. Small, focused tests around the edge "
    "cases catch most regressions, and they double as documentation for whoever touches the "
    "code next.",
    "One more thing worth doing while you are here: add a short comment explaining why the "
    "code looks the way it does. The what is visible in the code; the why is what gets lost "
    "after a few months.",
    "Keep the change small and commit it on its own, with a message that says what problem "
    "it solves. That makes it easy to review now and to revert later if something else "
    "depends on the old behaviour.",
    "Before you move on, run the whole test suite once. Changes like this one tend to break "
    "something two modules away, and it is much cheaper to find out now than after a deploy.",
    "If the frontend depends on this, tell whoever works on it, or write it down in the API "
    "notes. A small change in a response shape is the most common cause of a blank screen.",
    "For production, watch the logs for a day after you deploy this. Errors that never show "
    "up locally often come from old data or from clients still running an older version.",
    "There are fancier ways to do this, but for an app of this size the simple version is "
    "easier to read and to debug. We can revisit it if it ever shows up in a profile.",
    "Let me know if anything in there is unclear; I can walk through it line by line, or "
    "show how the same thing looks in a different style if that fits your code better.",
)
