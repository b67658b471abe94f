"""The web dashboard in a real browser: headless Chromium, driven by Selenium through
chromedriver, against a real ``rota up`` with jobs running on its (virtual) GPUs.

A member of the job's project logs in with its token, finds the running job on its GPU in the
grid, follows the link to the job's page and reads its state; a member of another project
logs in and finds neither the job nor its name anywhere, only the share of the GPU it holds.

Skipped unless ``ROTA_TEST_CHROMEDRIVER`` names a chromedriver (``.ci/chromium`` installs
Debian's ``chromium`` and ``chromium-driver`` and prints the export). With
``ROTA_DASHBOARD_SCREENSHOTS=DIR`` it also saves the pages it sees as PNG files in DIR (the
pictures in docs/ were made so).
"""

from __future__ import annotations

import os
import shutil
import sys
from functools import partial
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent))

from waiting import poll  # noqa: E402

DRIVER = os.environ.get("ROTA_TEST_CHROMEDRIVER")
pytestmark = pytest.mark.skipif(
    not DRIVER, reason="ROTA_TEST_CHROMEDRIVER is not set: eval \"$(.ci/chromium)\" installs "
                       "Chromium and chromedriver and sets it")
wait = partial(poll, timeout=60.0, every=0.1)
SLEEP = [sys.executable, "-c", "import time; time.sleep(600)"]


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1200,800", "--hide-scrollbars"):
        options.add_argument(arg)
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary:
        options.binary_location = binary
    return webdriver.Chrome(service=Service(executable_path=DRIVER), options=options)


def setup_cluster(server) -> dict[str, str]:
    """Projects vision and audio, a member of each with a token, and jobs of both running:
    vision's on one GPU and half of another, audio's on two; a vision job that waits."""
    with server.client() as op:
        for project in ("vision", "audio"):
            assert op.post("/v1/projects", json={"name": project}).status_code == 201
        tokens = {}
        for user, project in (("alice", "vision"), ("bob", "audio")):
            made = op.post("/v1/users", json={"name": user, "projects": [project]})
            assert made.status_code == 201, made.text
            issued = op.post("/v1/tokens", json={"name": "web", "user": user})
            assert issued.status_code == 201, issued.text
            tokens[user] = issued.json()["token"]
        ids = {}
        for name, project, gpu in (("train-vision", "vision", 1), ("notebook", "vision", 0.5),
                                   ("whisper-ft", "audio", 2)):
            made = op.post("/v1/jobs", json={"name": name, "project": project,
                                              "queue": "default", "entrypoint": SLEEP,
                                              "resources": {"gpu": gpu, "cpu": 0.1,
                                                            "memory": "256Mi"}})
            assert made.status_code == 201, made.text
            ids[name] = str(made.json()["id"])
        for job in ids.values():
            wait(lambda job=job: op.get(f"/v1/jobs/{job}").json()["state"] == "running",
                 f"job {job} to run")
        big = op.post("/v1/jobs", json={"name": "big-sweep", "project": "vision",
                                         "queue": "default", "entrypoint": SLEEP,
                                         "resources": {"gpu": 4, "cpu": 0.1,
                                                       "memory": "256Mi"}})
        assert big.status_code == 201, big.text
        ids["big-sweep"] = str(big.json()["id"])
        wait(lambda: op.get(f"/v1/jobs/{big.json()['id']}").json()["wait_reasons"],
             "the waiting job's reasons")
        placement = op.get(f"/v1/jobs/{ids['train-vision']}").json()["placement"][0]
    return {**tokens, **ids, "node": placement["node"],
            "gpu": str(placement["devices"][0]["index"])}


def log_in(driver, url: str, token: str) -> None:
    from selenium.webdriver.common.by import By
    driver.get(f"{url}/ui/")
    wait(lambda: "/ui/login" in driver.current_url, "the login form")
    driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.ID, "login").click()
    wait(lambda: driver.current_url.rstrip("/").endswith("/ui"), "the cluster page")


def log_out(driver) -> None:
    from selenium.webdriver.common.by import By
    driver.find_element(By.CSS_SELECTOR, "form[action='/ui/logout'] button").click()
    wait(lambda: "/ui/login" in driver.current_url, "the login form after logging out")


def shoot(driver, name: str) -> None:
    where = os.environ.get("ROTA_DASHBOARD_SCREENSHOTS")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        assert driver.save_screenshot(str(Path(where) / f"dashboard-{name}.png"))


def test_a_member_follows_its_running_job_from_the_gpu_grid_and_another_does_not_see_it(
        rota_server) -> None:
    from selenium.webdriver.common.by import By
    assert f"dashboard: {rota_server.url}/ui/" in rota_server.output()
    made = setup_cluster(rota_server)
    job, cell_id = made["train-vision"], f"gpu-{made['node']}-{made['gpu']}"
    driver = browser()
    try:
        log_in(driver, rota_server.url, made["alice"])
        assert "alice (member; vision)" in driver.find_element(By.ID, "who").text
        cell = driver.find_element(By.ID, cell_id)
        link = cell.find_element(By.CSS_SELECTOR, f"a[href='/ui/jobs/{job}']")
        assert link.text.startswith(f"job {job} train-vision (vision): 1 GPU")
        grid = driver.find_element(By.TAG_NAME, "main").text
        assert "another project: 1 GPU" in grid and "whisper-ft" not in grid
        shoot(driver, "overview")
        link.click()
        wait(lambda: driver.current_url.endswith(f"/ui/jobs/{job}"), "the job's page")
        assert driver.find_element(By.ID, "job-state").text == "running"
        assert f"{made['node']}: GPU {made['gpu']}" in driver.find_element(
            By.ID, "job-placement").text
        shoot(driver, "job")
        driver.get(f"{rota_server.url}/ui/jobs")
        rows = [r.get_attribute("id") for r in driver.find_elements(By.CSS_SELECTOR,
                                                                    "table.jobs tbody tr")]
        assert f"job-{job}" in rows and f"job-{made['whisper-ft']}" not in rows
        shoot(driver, "jobs")
        driver.get(f"{rota_server.url}/ui/jobs/{made['big-sweep']}")
        assert driver.find_element(By.ID, "job-state").text == "pending"
        assert "Why pending" in driver.find_element(By.ID, "job-why").text
        shoot(driver, "pending")
        log_out(driver)

        log_in(driver, rota_server.url, made["bob"])
        cell = driver.find_element(By.ID, cell_id)
        assert cell.find_elements(By.TAG_NAME, "a") == []
        assert "another project: 1 GPU" in cell.text
        everywhere = driver.find_element(By.TAG_NAME, "main").text
        driver.get(f"{rota_server.url}/ui/jobs?state=all")
        everywhere += driver.find_element(By.TAG_NAME, "main").text
        assert f"job-{made['whisper-ft']}" in [
            r.get_attribute("id") for r in driver.find_elements(By.CSS_SELECTOR,
                                                                "table.jobs tbody tr")]
        driver.get(f"{rota_server.url}/ui/jobs/{job}")
        everywhere += driver.find_element(By.TAG_NAME, "main").text
        assert "Not found" in everywhere
        for hidden in ("train-vision", "notebook", "big-sweep", "vision", f"job {job}"):
            assert hidden not in everywhere
    finally:
        driver.quit()
