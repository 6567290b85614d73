"""Routes for Git subscriptions (docs/subscriptions.md): list, show, add, remove, and pull now
(a Run of the subscription's pull task, as run now admits one)."""

from __future__ import annotations

from qinglong.domain.identifiers import entity_id, project_id
from qinglong.domain.repos import DEFAULT_INCLUDE, RepoSpec
from qinglong.ids import new_uuid
from qinglong.service.accounts import Level
from qinglong.service.views import repos as views
from qinglong.web import requests as rq
from qinglong.web.routing import Call, Endpoint, Query, Reply

R = "/api/v1/projects/{project}/repos"


def _repo(call: Call) -> tuple[str, str]:
    return project_id(call.path["project"]), entity_id(call.path["repo"], "repo")


def list_repos(call: Call) -> Reply:
    found = call.backend.repos.listing(project_id(call.path["project"]), bool(call.query["all"]))
    return Reply([views.repo_view(r) for r in found])


def show_repo(call: Call) -> Reply:
    return Reply(views.repo_view(call.backend.repos.get(*_repo(call))))


def add_repo(call: Call) -> Reply:
    project = project_id(call.path["project"])
    body: rq.RepoAddRequest = call.body
    name = entity_id(body.name, "name")
    spec = RepoSpec(url=body.url, branch=body.branch,
                    include=tuple(body.include) if body.include is not None else DEFAULT_INCLUDE,
                    exclude=tuple(body.exclude), auto_tasks=body.auto_tasks,
                    timezone=body.timezone, token_env=body.token_env,
                    ssh_key_env=body.ssh_key_env)
    added = call.backend.repos.add(project, name, spec, call.who.username, cron=body.schedule,
                                   timezone=body.timezone)
    call.audit("repo.add", project=project, target=f"repo {name}",
               detail={"url": spec.url, "branch": spec.branch, "auto_tasks": spec.auto_tasks})
    return Reply(views.repo_view(added), 201)


def remove_repo(call: Call) -> Reply:
    project, name = _repo(call)
    removed = call.backend.repos.remove(project, name)
    call.audit("repo.remove", project=project, target=f"repo {name}")
    return Reply(views.repo_view(removed))


def pull_repo(call: Call) -> Reply:
    project, name = _repo(call)
    run = call.backend.repos.pull(project, name, call.who.username, new_uuid())
    call.audit("repo.pull", project=project, target=f"repo {name}", detail={"run": run})
    return Reply(views.RepoPullView(project=project, name=name, run=run), 201)


ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("GET", R, list_repos, "List a project's Git subscriptions", "subscriptions",
             Level.READ, response=views.RepoView, many=True,
             query=(Query("all", "bool", "Include removed subscriptions", default=False),)),
    Endpoint("POST", R, add_repo, "Subscribe the project to a Git repository (its pull task "
             "and, with a schedule, the trigger that pulls)", "subscriptions", Level.ADMIN,
             body=rq.RepoAddRequest, response=views.RepoView, status=201),
    Endpoint("GET", f"{R}/{{repo}}", show_repo, "Show a subscription and what its last pull "
             "did", "subscriptions", Level.READ, response=views.RepoView),
    Endpoint("DELETE", f"{R}/{{repo}}", remove_repo, "End a subscription (its pull task and "
             "trigger are disabled; what it imported stays)", "subscriptions", Level.ADMIN,
             response=views.RepoView),
    Endpoint("POST", f"{R}/{{repo}}/pull", pull_repo, "Pull now: admit a Run of the pull task",
             "subscriptions", Level.OPERATE, body=rq.Empty, response=views.RepoPullView,
             status=201),
)
