"""Suite-wide checks: every op call the suite makes must fit its op's schema (kiln/dispatch/schema.h)."""
import pytest

import kiln


@pytest.fixture(scope="session", autouse=True)
def calls_fit_their_schemas():
    kiln._C._set_schema_check(True)
    yield
    kiln._C._set_schema_check(False)
    problems = kiln._C._schema_problems()
    assert not problems, "op calls that do not fit their schemas:\n" + "\n".join(problems)
