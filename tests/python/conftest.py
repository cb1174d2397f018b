"""Suite-wide checks on every op call the suite makes:
- it fits its op's schema (kiln/dispatch/schema.h);
- its op's meta function, run on data-less (meta) twins of the inputs, gives the sizes and dtypes (for
  a view also the strides) that the kernel produced (kiln/dispatch/op.h: set_meta_check)."""
import pytest

import kiln


@pytest.fixture(scope="session", autouse=True)
def calls_fit_their_schemas_and_metas():
    kiln._C._set_schema_check(True)
    kiln._C._set_meta_check(True)
    yield
    kiln._C._set_schema_check(False)
    kiln._C._set_meta_check(False)
    problems = kiln._C._schema_problems()
    assert not problems, "op calls that do not fit their schemas:\n" + "\n".join(problems)
    problems = kiln._C._meta_problems()
    assert not problems, "op calls whose meta disagrees with the kernel:\n" + "\n".join(problems)
