"""Each recipe end to end: loopback Zenodo/TCIA server (or a manual file) -> download ->
prepare -> verify -> load, with geometry and labels checked against what was generated."""

from __future__ import annotations

import io
import json
import shutil
import sys
import urllib.parse
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk
from pydicom.uid import generate_uid

from intrabench import registry
from intrabench.cli import main

sys.path.insert(0, str(Path(__file__).parent))
from _dicom import write_ct, write_rtstruct, write_seg  # noqa: E402

SHAPE = (8, 16, 20)  # (k, j, i)


@dataclass
class Expect:
    """What a prepared output must contain."""

    cases: dict[str, tuple[sitk.Image, object]] = field(default_factory=dict)  # geometry, label
    skipped: dict[str, str] = field(default_factory=dict)  # case id -> reason fragment
    labels: dict[str, int] | None = None


def box(k0, k1, j0, j1, i0, i1, shape=SHAPE) -> np.ndarray:
    mask = np.zeros(shape, dtype=bool)
    mask[k0:k1, j0:j1, i0:i1] = True
    return mask


def zip_bytes(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        for name, data in files.items():
            bundle.writestr(name, data)
    return buffer.getvalue()


def image_bytes(image: sitk.Image, suffix: str) -> bytes:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"x{suffix}"
        sitk.WriteImage(image, str(path), useCompression=suffix != ".nrrd")
        return path.read_bytes()


def make_image(
    array: np.ndarray,
    spacing=(0.9, 0.8, 2.0),
    origin=(5.0, -7.0, 11.0),
    direction=(1, 0, 0, 0, 1, 0, 0, 0, 1),
) -> sitk.Image:
    image = sitk.GetImageFromArray(array)
    image.SetSpacing(spacing)
    image.SetOrigin(origin)
    image.SetDirection([float(v) for v in direction])
    return image


def ct_volume(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(-200, 300, SHAPE).astype(np.int16)


# -- fake services ----------------------------------------------------------------------------
class Tcia:
    def __init__(self, server, tmp: Path, collection: str) -> None:
        self.server, self.tmp, self.collection, self.listing = (
            server,
            tmp / "tcia-src",
            collection,
            [],
        )

    def _add(self, folder: Path, first, modality: str, count: int, description: str = "") -> None:
        uid = str(first.SeriesInstanceUID)
        self.listing.append(
            {
                "SeriesInstanceUID": uid,
                "StudyInstanceUID": str(first.StudyInstanceUID),
                "PatientID": str(first.PatientID),
                "Modality": modality,
                "ImageCount": count,
                "SeriesDescription": description,
                "Collection": self.collection,
            }
        )
        files = {p.name: p.read_bytes() for p in sorted(folder.iterdir())}
        query = urllib.parse.urlencode({"SeriesInstanceUID": uid})
        self.server.routes[f"/tcia/getImage?{query}"] = zip_bytes(files)

    def ct(self, patient, volume, study_uid, date="20200101", description="CT", corrupt=False):
        folder = self.tmp / generate_uid()
        sources = write_ct(
            folder, volume, patient=patient, study_uid=study_uid, date=date, description=description
        )
        if corrupt:  # truncate the pixel data of a middle slice
            victim = sorted(folder.iterdir())[len(sources) // 2]
            victim.write_bytes(victim.read_bytes()[:-200])
        self._add(folder, sources[0], "CT", len(sources), description)
        reference = (
            sitk.ReadImage([str(p) for p in sorted(folder.iterdir())]) if not corrupt else None
        )
        return sources, reference

    def seg(self, sources, masks) -> None:
        folder = self.tmp / generate_uid()
        seg = write_seg(folder / "seg.dcm", sources, masks)
        self._add(folder, seg, "SEG", 1)

    def rtstruct(self, sources, boxes) -> None:
        folder = self.tmp / generate_uid()
        ds = write_rtstruct(folder / "rt.dcm", sources, boxes)
        self._add(folder, ds, "RTSTRUCT", 1)

    def publish(self) -> None:
        query = urllib.parse.urlencode({"Collection": self.collection})
        self.server.routes[f"/tcia/getSeries?{query}"] = json.dumps(self.listing).encode()


def zenodo(server, record: str, files: dict[str, bytes]) -> None:
    import hashlib

    entries = [
        {
            "key": name,
            "size": len(data),
            "checksum": "md5:" + hashlib.md5(data).hexdigest(),
            "links": {"self": server.url(f"/records/{record}/files/{name}/content")},
        }
        for name, data in files.items()
    ]
    server.routes[f"/api/records/{record}"] = json.dumps({"id": record, "files": entries}).encode()
    for name, data in files.items():
        server.routes[f"/records/{record}/files/{name}/content"] = data


# -- builders: one per recipe -----------------------------------------------------------------
def build_rider_lung(server, tmp, root):
    tcia = Tcia(server, tmp, "RIDER Lung CT")
    a, b, c = box(1, 3, 2, 5, 2, 6), box(5, 7, 9, 12, 10, 14), box(5, 7, 2, 4, 15, 18)
    sources, reference = tcia.ct("RIDER-1", ct_volume(1), generate_uid())
    tcia.seg(sources, {"Lesion 1": a, "Lesion 2": b | c})
    tcia.seg(sources, {"Lesion 1": a, "Lesion 2": b | c})  # a second label series of the same CT
    bad, _ = tcia.ct("RIDER-2", ct_volume(2), generate_uid(), corrupt=True)
    tcia.seg(bad, {"Lesion 1": a})
    tcia.publish()
    return {
        "rider-lung": Expect(
            {"rider_lung_RIDER-1": (reference, [a, c, b])},
            {
                "rider_lung_RIDER-2": "004.dcm belongs to the series but cannot be",
                "rider_lung_RIDER-1_2": "same image",
            },
        )
    }


def build_lnq(server, tmp, root):
    tcia = Tcia(server, tmp, "Mediastinal-Lymph-Node-SEG")
    a, b = box(1, 4, 2, 5, 2, 6), box(4, 6, 10, 13, 12, 16)
    sources, reference = tcia.ct("LNQ-1", ct_volume(3), generate_uid())
    tcia.seg(sources, {"lymph nodes": a | b})
    rt_sources, rt_reference = tcia.ct("LNQ-2", ct_volume(4), generate_uid())
    tcia.rtstruct(rt_sources, {"node": [(2, 3, 5, 4, 8), (3, 3, 5, 4, 8)]})  # RTSTRUCT path
    tcia.publish()
    return {
        "lnq": Expect(
            {"lnq_LNQ-1": (reference, [a, b]), "lnq_LNQ-2": (rt_reference, [box(2, 4, 3, 6, 4, 9)])}
        )
    }


def build_colorectal(server, tmp, root):
    tcia = Tcia(server, tmp, "Colorectal-Liver-Metastases")
    liver = box(0, 8, 0, 16, 0, 10)
    t1 = box(1, 3, 2, 4, 2, 4) | box(5, 7, 2, 4, 2, 4)  # one segment, two pieces: one instance
    t2 = box(2, 4, 8, 12, 12, 18)
    sources, reference = tcia.ct("CRLM-CT-1001", ct_volume(5), generate_uid())
    tcia.seg(
        sources,
        {"Liver": liver, "Tumor_1": t1, "Tumor_2": t2, "Portal vein": box(0, 2, 14, 16, 0, 2)},
    )
    other, _ = tcia.ct("CRLM-CT-1002", ct_volume(6), generate_uid())
    tcia.seg(other, {"Liver": liver, "Tumor_1": t2, "Tumor_2": t2 & box(0, 3, 0, 16, 0, 20)})
    tcia.publish()
    return {
        "colorectal-liver-metastases": Expect(
            {"CRLM-CT-1001": (reference, [t1, t2])}, {"CRLM-CT-1002": "overlap"}
        )
    }


def build_adrenal(server, tmp, root):
    tcia = Tcia(server, tmp, "Adrenal-ACC-Ki67-Seg")
    near_a, near_b = box(1, 4, 2, 6, 2, 5), box(1, 4, 2, 6, 6, 9)  # 1-voxel gap: one tumour
    far = box(4, 7, 10, 14, 12, 16)
    speck = box(7, 8, 0, 1, 18, 20)  # 2 voxels: dropped
    sources, reference = tcia.ct("ACC-1", ct_volume(7), generate_uid())
    tcia.seg(sources, {"Tumor": near_a | near_b | far | speck})
    tcia.publish()
    return {"adrenal-acc": Expect({"ACC-1": (reference, [near_a | near_b, far])})}


def build_hcc(server, tmp, root):
    tcia = Tcia(server, tmp, "HCC-TACE-Seg")
    liver, mass = box(0, 8, 0, 12, 0, 12), box(2, 4, 2, 4, 2, 4)
    necrosis, portal = box(5, 7, 6, 9, 6, 9), box(0, 8, 12, 14, 4, 6)
    study1, study2 = generate_uid(), generate_uid()
    s1, ref1 = tcia.ct("HCC_001", ct_volume(8), study1, "20200101", "Recon 3")
    tcia.ct("HCC_001", ct_volume(9), study1, "20200101", "Recon 2")  # another series, same study
    tcia.seg(s1, {"Liver": liver, "Mass": mass, "Necrosis": necrosis, "Portal vein": portal})
    s2, ref2 = tcia.ct("HCC_001", ct_volume(10), study2, "20210101", "Recon 3")
    tcia.seg(s2, {"Liver": liver, "Portal vein": portal})  # follow-up without tumour
    tcia.publish()
    whole = (liver | mass | necrosis | portal).astype(np.uint8)
    return {
        "hcc-tace-liver": Expect(
            {"HCC_001": (ref1, whole), "HCC_001_2": (ref2, (liver | portal).astype(np.uint8))}
        ),
        "hcc-tace-lesion": Expect({"HCC_001": (ref1, [mass, necrosis])}, {"HCC_001_2": "Mass"}),
    }


def _hanseg_anatomy(shape=(24, 32, 32)):
    k, j, i = np.ogrid[: shape[0], : shape[1], : shape[2]]
    head = ((k - 12) / 10) ** 2 + ((j - 16) / 13) ** 2 + ((i - 16) / 12) ** 2 <= 1
    brainstem = ((k - 10) / 4) ** 2 + ((j - 18) / 3) ** 2 + ((i - 16) / 3) ** 2 <= 1
    parotid = ((k - 14) / 3) ** 2 + ((j - 12) / 3) ** 2 + ((i - 8) / 2.5) ** 2 <= 1
    return head, brainstem, parotid


def build_hanseg(server, tmp, root):
    from intrabench.datasets.hanseg import HANSEG_ORGANS

    head, brainstem, parotid = _hanseg_anatomy()
    ct = np.where(head, 40.0, -1000.0)
    ct[brainstem] = 300.0
    ct[parotid] = -80.0
    mr = np.where(head, 600.0, 0.0)
    mr[brainstem] = 150.0
    mr[parotid] = 900.0
    spacing, origin = (1.5, 1.5, 2.0), (-20.0, -30.0, 10.0)
    shift = (3.0, -1.5, 2.0)  # the MR sees the anatomy moved by this (mm)
    ct_img = make_image(ct.astype(np.int16), spacing, origin)
    mr_img = make_image(mr.astype(np.float32), spacing, tuple(o + s for o, s in zip(origin, shift)))
    files = {
        "HaN-Seg/set_1/case_01/case_01_IMG_CT.nrrd": image_bytes(ct_img, ".nrrd"),
        "HaN-Seg/set_1/case_01/case_01_IMG_MR_T1.nrrd": image_bytes(mr_img, ".nrrd"),
    }
    for organ, mask in (("Brainstem", brainstem), ("Parotid_L", parotid)):
        files[f"HaN-Seg/set_1/case_01/case_01_OAR_{organ}.seg.nrrd"] = image_bytes(
            make_image(mask.astype(np.uint8), spacing, origin), ".nrrd"
        )
    zenodo(server, "7442914", {"HaN-Seg.zip": zip_bytes(files)})
    values = {n: i for i, n in enumerate(HANSEG_ORGANS, 1)}
    expected = np.zeros(mr.shape, np.uint8)
    expected[brainstem] = values["Brainstem"]
    expected[parotid] = values["Parotid_L"]
    return {"hanseg": Expect({"case_01": (mr_img, ("dice", expected, 0.85))})}


def build_hntsmrg(server, tmp, root):
    direction = (-1, 0, 0, 0, 1, 0, 0, 0, 1)  # not identity: geometry must survive
    t2 = np.random.default_rng(11).normal(100, 20, SHAPE).astype(np.float32)
    mask = np.zeros(SHAPE, np.uint8)
    gtvp, gtvn = box(2, 5, 3, 8, 3, 9), box(5, 7, 10, 14, 12, 17)
    mask[gtvp], mask[gtvn] = 1, 2
    img = make_image(t2, direction=direction)
    only_nodes = np.where(mask == 2, 2, 0).astype(np.uint8)
    files = {}
    for case, label, label_spacing in (
        ("10", mask, (0.9, 0.8, 2.0)),
        ("11", only_nodes, (0.9, 0.8, 2.0)),
        ("12", mask, (1.0, 1.0, 2.0)),
    ):
        prefix = f"HNTSMRG24_train/{case}/preRT/{case}"
        files[f"{prefix}_preRT_T2.nii.gz"] = image_bytes(img, ".nii.gz")
        files[f"{prefix}_preRT_mask.nii.gz"] = image_bytes(
            make_image(label, label_spacing, direction=direction), ".nii.gz"
        )
    zenodo(server, "11199559", {"HNTSMRG24_train.zip": zip_bytes(files)})
    return {"hntsmrg": Expect({"10": (img, [gtvp])}, {"11": "no primary", "12": "grid"})}


def build_pengwin(server, tmp, root):
    ct1 = make_image(ct_volume(12))
    ct2 = make_image(ct_volume(13), origin=(0.0, 0.0, 0.0))
    lab1 = np.zeros(SHAPE, np.uint8)
    f1, f2, f3 = box(1, 3, 1, 4, 1, 4), box(4, 6, 5, 8, 5, 8), box(6, 8, 10, 14, 10, 14)
    lab1[f1], lab1[f2], lab1[f3] = 1, 11, 21
    lab2 = np.zeros(SHAPE, np.uint8)
    lab2[f2] = 12
    zenodo(
        server,
        "10927452",
        {
            "PENGWIN_CT_train_images_part1.zip": zip_bytes(
                {"PENGWIN_CT_train_images/001.mha": image_bytes(ct1, ".mha")}
            ),
            "PENGWIN_CT_train_images_part2.zip": zip_bytes(
                {"PENGWIN_CT_train_images/002.mha": image_bytes(ct2, ".mha")}
            ),
            "PENGWIN_CT_train_labels.zip": zip_bytes(
                {
                    "PENGWIN_CT_train_labels/001.mha": image_bytes(make_image(lab1), ".mha"),
                    "PENGWIN_CT_train_labels/002.mha": image_bytes(
                        make_image(lab2, origin=(0.0, 0.0, 0.0)), ".mha"
                    ),
                }
            ),
        },
    )
    expected1 = np.zeros(SHAPE, np.uint8)
    expected1[f1], expected1[f2], expected1[f3] = 1, 2, 3
    return {"pengwin": Expect({"001": (ct1, expected1), "002": (ct2, f2.astype(np.uint8))})}


def build_ms(server, tmp, root):
    flair = make_image(np.random.default_rng(14).normal(50, 10, SHAPE).astype(np.float32))
    a, b = box(1, 3, 2, 5, 2, 5), box(5, 7, 9, 12, 9, 12)
    files = {}
    for n in ("1", "2"):
        files[f"Patient-{n}/{n}-Flair.nii"] = image_bytes(flair, ".nii")
        files[f"Patient-{n}/{n}-LesionSeg-Flair.nii"] = image_bytes(
            make_image((a | b).astype(np.uint8) if n == "1" else a.astype(np.uint8)), ".nii"
        )
    raw = root / "raw" / "ms-lesions"
    raw.mkdir(parents=True)
    (raw / "8bctsm8jz7-1.zip").write_bytes(zip_bytes(files))
    return {"ms-lesions": Expect({"ms_1": (flair, [a, b]), "ms_2": (flair, [a])})}


def build_segrap(server, tmp, root):
    ct = make_image(ct_volume(15))
    brain, eye = box(0, 8, 0, 8, 0, 20), box(2, 6, 10, 15, 2, 8)
    lens = box(3, 5, 11, 13, 3, 5)  # inside the eye: the smaller organ must win
    files = {
        "SegRap2023_Training_Set/segrap_0001/image.nii.gz": image_bytes(ct, ".nii.gz"),
        "SegRap2023_Training_Set/segrap_0001/image_contrast.nii.gz": image_bytes(ct, ".nii.gz"),
    }
    for organ, mask in (("Lens_left", lens), ("Brain", brain), ("Eye_left", eye)):
        files[
            f"SegRap2023_Training_Set_Labels/Update_Labels(Task001)/segrap_0001/{organ}.nii.gz"
        ] = image_bytes(make_image(mask.astype(np.uint8)), ".nii.gz")
    raw = root / "raw" / "segrap"
    raw.mkdir(parents=True)
    (raw / "SegRap2023_Training_Set.zip").write_bytes(zip_bytes(files))
    expected = np.zeros(SHAPE, np.uint8)
    expected[brain], expected[eye], expected[lens] = 1, 2, 3
    return {
        "segrap": Expect(
            {"segrap_0001": (ct, expected)},
            labels={"background": 0, "Brain": 1, "Eye_left": 2, "Lens_left": 3},
        )
    }


BUILDERS = {
    "ms-lesions": build_ms,
    "hanseg": build_hanseg,
    "hntsmrg": build_hntsmrg,
    "rider-lung": build_rider_lung,
    "lnq": build_lnq,
    "colorectal-liver-metastases": build_colorectal,
    "adrenal-acc": build_adrenal,
    "hcc-tace-liver": build_hcc,
    "pengwin": build_pengwin,
    "segrap": build_segrap,
}


# -- checks -----------------------------------------------------------------------------------
def assert_geometry(image: sitk.Image, reference: sitk.Image) -> None:
    assert image.GetSize() == reference.GetSize()
    np.testing.assert_allclose(image.GetSpacing(), reference.GetSpacing(), atol=1e-5)
    np.testing.assert_allclose(image.GetOrigin(), reference.GetOrigin(), atol=1e-4)
    np.testing.assert_allclose(image.GetDirection(), reference.GetDirection(), atol=1e-6)


def assert_instances(label: np.ndarray, masks: list[np.ndarray]) -> None:
    values = sorted(set(np.unique(label).tolist()) - {0})
    assert values == list(range(1, len(masks) + 1))
    for mask in masks:
        ids = np.unique(label[mask])
        assert ids.size == 1 and ids[0] > 0, f"one instance per mask, got {ids}"
        np.testing.assert_array_equal(label == ids[0], mask)


def run_cli(*args: str) -> int:
    return main(list(args))


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_recipe_end_to_end(name, http_server, tmp_path, capsys, monkeypatch):
    root = tmp_path / "data"
    expects = BUILDERS[name](http_server, tmp_path, root)
    if name == "hanseg":  # fewer optimizer iterations: the synthetic shift is small
        from intrabench.datasets.hanseg import HanSegRecipe

        monkeypatch.setattr(HanSegRecipe, "iterations", 60)
    common = ["--root", str(root), "-q"]
    assert (
        run_cli(
            "datasets",
            "download",
            name,
            "--zenodo-url",
            http_server.base,
            "--tcia-url",
            http_server.url("/tcia"),
            *common,
        )
        == 0
    )
    out = capsys.readouterr().out
    series_json = root / "raw" / registry.datasets.get(name).recipe.key / "series.json"
    if series_json.exists():  # TCIA: only label series and the images they reference
        kept = {s["SeriesInstanceUID"] for s in json.loads(series_json.read_text())}
        fetched = {
            urllib.parse.parse_qs(path.split("?", 1)[1])["SeriesInstanceUID"][0]
            for path, _ in http_server.requests
            if "getImage" in path
        }
        assert fetched == kept
        if name == "hcc-tace-liver":  # the unreferenced "Recon 2" series is not downloaded
            listed = json.loads(
                http_server.routes[next(r for r in http_server.routes if "getSeries" in r)]
            )
            assert len(listed) == 5 and len(kept) == 4
    if name in ("ms-lesions", "segrap"):
        assert "already downloaded" in out  # the manual file was put in place by the test
    assert run_cli("datasets", "prepare", name, *common) == 0
    out = capsys.readouterr().out
    for output, expect in expects.items():
        folder = root / output
        meta = json.loads((folder / "dataset.json").read_text())
        assert meta["name"] == output
        assert meta["numTraining"] == len(expect.cases)
        assert set(meta["target_types"].values()) <= {"organ", "instance"}
        if expect.labels is not None:
            assert meta["labels"] == expect.labels
        assert sorted(p.name for p in (folder / "labelsTr").iterdir()) == sorted(
            f"{c}.nii.gz" for c in expect.cases
        )
        for case_id, reason in expect.skipped.items():
            assert reason.lower() in meta["skipped"][case_id].lower()
            assert f"skipped {case_id}" in out
        for case_id, (reference, wanted) in expect.cases.items():
            image = sitk.ReadImage(str(folder / "imagesTr" / f"{case_id}_0000.nii.gz"))
            label_img = sitk.ReadImage(str(folder / "labelsTr" / f"{case_id}.nii.gz"))
            assert_geometry(image, reference)
            assert_geometry(label_img, reference)
            np.testing.assert_allclose(
                sitk.GetArrayFromImage(image), sitk.GetArrayFromImage(reference), atol=1e-3
            )
            label = sitk.GetArrayFromImage(label_img)
            if isinstance(wanted, list):
                assert meta["instance_ids"] is True
                assert_instances(label, wanted)
            elif isinstance(wanted, tuple):  # ("dice", expected, minimum) per class
                _, expected_map, minimum = wanted
                for value in set(np.unique(expected_map).tolist()) - {0}:
                    a, b = label == value, expected_map == value
                    dice = 2 * (a & b).sum() / (a.sum() + b.sum())
                    assert dice >= minimum, f"class {value}: dice {dice:.3f}"
            else:
                np.testing.assert_array_equal(label, wanted)
        assert run_cli("datasets", "verify", output, *common) == 0
        dataset = registry.datasets.create(output, {"root": str(root)})
        assert dataset.case_ids() == sorted(expect.cases)
        case = dataset.load(sorted(expect.cases)[0])
        assert case.targets and case.label.shape == case.image.shape
    # idempotent: a second prepare does nothing and touches no file
    stamps = {p: p.stat().st_mtime_ns for p in root.rglob("*.nii.gz") if "raw" not in p.parts}
    capsys.readouterr()
    assert run_cli("datasets", "prepare", name, *common) == 0
    assert "up to date" in capsys.readouterr().out
    assert stamps == {p: p.stat().st_mtime_ns for p in stamps}
    shutil.rmtree(tmp_path / "tcia-src", ignore_errors=True)
