"""Target attributes for result rows that lack them, measured from the run's own datasets."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from intrabench.attributes.stratify import rows_without_attributes
from intrabench.errors import UserError

log = logging.getLogger(__name__)


def rows_with_attributes(rows: pd.DataFrame, run_dir: str | Path) -> pd.DataFrame:
    """``rows`` with ``attr_*`` columns filled for every target: rows that lack them are
    measured from the datasets named in ``RUN_DIR/config.yaml`` (through the attribute cache,
    so a case is measured once). UserError when a case cannot be read (data moved).

    Args:
        rows: Result rows with ``dataset``, ``case`` and ``target`` columns, some or all
            without ``attr_*`` values.
        run_dir: The run directory whose config names the datasets.

    Returns:
        The rows with one ``attr_<name>`` column per attribute (the same frame when every row
        has them).

    Raises:
        UserError: A case needed cannot be read.
    """
    missing = rows_without_attributes(rows)
    if not missing.any():
        return rows
    from intrabench.attributes.cache import case_with_attributes
    from intrabench.config import run_config, run_dataset
    from intrabench.errors import DataError

    config = run_config(run_dir)
    found: list[dict] = []
    needed = rows.loc[missing, ["dataset", "case"]].drop_duplicates()
    for dataset_key, cases in needed.groupby("dataset", sort=True):
        dataset = run_dataset(run_dir, config, str(dataset_key))
        for case_id in cases["case"]:
            try:
                case = dataset.load(str(case_id))
            except DataError as error:
                raise UserError(
                    f"{dataset_key}/{case_id}: cannot read it to measure its "
                    f"targets' attributes: {error}"
                ) from None
            log.info("measuring target attributes of %s/%s", dataset_key, case_id)
            for target_id, values in case_with_attributes(case, dataset).attributes.items():
                found.append(
                    {
                        "dataset": dataset_key,
                        "case": case_id,
                        "target": target_id,
                        **{f"attr_{k}": v for k, v in values.items()},
                    }
                )
    measured = pd.DataFrame(found)
    keys = ["dataset", "case", "target"]
    kept = rows.drop(columns=[c for c in rows.columns if c.startswith("attr_")])
    present = rows.loc[~missing, keys + [c for c in rows.columns if c.startswith("attr_")]]
    table = pd.concat([present.drop_duplicates(keys), measured], ignore_index=True)
    table = table.drop_duplicates(keys, keep="first")
    return kept.merge(table, on=keys, how="left")
