"""Headless Chromium for the page's tests (Selenium): the test is skipped (exit 77) without Selenium, Chromium or its
driver; start() opens the browser every test uses (Chinese, no network beyond the server, the console logged);
waiter(check) gives a wait whose timeout is a failed check (and that reads again what the page redrew); session()
runs a test's server and browser. Screenshots go to OUT (ignored by git). It puts tests/integration on the path, for http_server."""
import contextlib
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'integration'))

try:
    from selenium import webdriver
    from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By  # noqa: F401 (for the tests)
    from selenium.webdriver.common.keys import Keys  # noqa: F401
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:
    print('skip: python3-selenium is not installed')
    sys.exit(77)
CHROMIUM = shutil.which('chromium') or '/usr/bin/chromium'
DRIVER = shutil.which('chromedriver') or '/usr/bin/chromedriver'
if not (os.path.exists(CHROMIUM) and os.path.exists(DRIVER)):
    print('skip: chromium / chromedriver are not installed')
    sys.exit(77)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'out')


def start(width=1400, height=900):
    os.makedirs(OUT, exist_ok=True)
    opts = webdriver.ChromeOptions()
    for a in ('--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
              f'--window-size={width},{height}', '--lang=zh-CN', '--no-proxy-server', '--disable-extensions',
              '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'):
        opts.add_argument(a)
    opts.binary_location = CHROMIUM
    opts.set_capability('goog:loggingPrefs', {'browser': 'ALL'})
    return webdriver.Chrome(service=Service(DRIVER), options=opts)


def waiter(check):
    def wait(driver, cond, what, timeout_s=30):
        try:
            # a list the page draws again while the condition reads it: read it again
            return WebDriverWait(driver, timeout_s, poll_frequency=0.05,
                                 ignored_exceptions=(StaleElementReferenceException,)).until(cond)
        except TimeoutException:
            check(what, False, 'timed out')
            return None
    return wait


@contextlib.contextmanager
def session(server, check, name):
    """The server (tests/integration/http_server.py) started and a browser: on an exception, a failed check with the
    server's log and OUT/failure-NAME.png; however the test ends, the browser closed and the server stopped (a
    check: it exits 0)."""
    driver = None
    try:
        server.start()
        driver = start()
        yield driver
    except Exception as e:
        check('no exception', False, f'{e!r}\n{server.log_text()}')
        if driver:
            driver.save_screenshot(os.path.join(OUT, f'failure-{name}.png'))
        raise
    finally:
        if driver:
            driver.quit()
        check('server exits 0', server.stop() == 0, server.log_text())
        server.close()
