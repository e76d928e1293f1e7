import pytest

from hyperjob.api.quantity import QuantityError, add, fits, format_quantity, parse_quantity, parse_resource_list


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("500m", 0.5),
        ("2", 2.0),
        (8, 8.0),
        (0.25, 0.25),
        ("1.5", 1.5),
        ("64Gi", 64 * 2**30),
        ("1Ti", 2**40),
        ("1G", 1e9),
        ("128Mi", 128 * 2**20),
        ("1000m", 1.0),
        ("2500m", 2.5),
        ("1e3", 1000.0),
        ("1.5k", 1500.0),
        ("100u", 1e-4),
    ],
    ids=lambda v: str(v),
)
def test_quantities_parse_to_base_units(text, expected):
    assert parse_quantity(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["", "abc", "1.2.3", "5 Gi", "Gi", "1Xi", True])
def test_malformed_quantity_is_rejected_with_the_text(text):
    with pytest.raises(QuantityError, match="quantity"):
        parse_quantity(text)


def test_resource_list_error_names_the_resource():
    with pytest.raises(QuantityError, match="^memory: "):
        parse_resource_list({"cpu": "1", "memory": "lots"})


def test_add_and_fits_work_dimension_by_dimension():
    total = add({"cpu": 1.0}, {"cpu": 2.0, "nvidia.com/gpu": 1.0})
    assert total == {"cpu": 3.0, "nvidia.com/gpu": 1.0}
    assert fits({"cpu": 3.0}, total)
    assert not fits({"cpu": 3.5}, total)
    assert not fits({"memory": 1.0}, total)


@pytest.mark.parametrize(
    ("name", "amount", "text"),
    [("cpu", 0.5, "500m"), ("cpu", 8.0, "8"), ("memory", 64 * 2**30, "64Gi"), ("nvidia.com/gpu", 8.0, "8")],
)
def test_format_quantity_round_trips_common_values(name, amount, text):
    assert format_quantity(name, amount) == text
    assert parse_quantity(text) == amount
