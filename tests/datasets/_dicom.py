"""Synthetic DICOM for the tests: CT series (pydicom), DICOM-SEG (highdicom), RTSTRUCT (pydicom).

Arrays are (k, j, i) = (slice, row, column); spacing is (x, y, z) in mm like SimpleITK.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pydicom.dataset import Dataset, FileMetaDataset
from pydicom.sequence import Sequence
from pydicom.uid import ExplicitVRLittleEndian, generate_uid

CT_STORAGE = "1.2.840.10008.5.1.4.1.1.2"
RTSTRUCT_STORAGE = "1.2.840.10008.5.1.4.1.1.481.3"


def _meta(sop_class: str, sop_uid: str) -> FileMetaDataset:
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = sop_class
    meta.MediaStorageSOPInstanceUID = sop_uid
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    return meta


def _patient_study(ds: Dataset, patient: str, study_uid: str, date: str) -> None:
    ds.PatientID = patient
    ds.PatientName = f"{patient}^"
    ds.PatientBirthDate = ""
    ds.PatientSex = "O"
    ds.StudyInstanceUID = study_uid
    ds.StudyDate = date
    ds.StudyTime = "120000"
    ds.StudyID = "1"
    ds.AccessionNumber = ""
    ds.ReferringPhysicianName = ""


def write_ct(
    folder: Path,
    volume: np.ndarray,
    spacing=(0.8, 0.7, 2.5),
    origin=(-10.0, 20.0, 30.0),
    *,
    patient: str,
    study_uid: str,
    date: str = "20200101",
    description: str = "CT",
) -> list[Dataset]:
    """Write an axial CT series; returns the datasets (with pixel data) for highdicom."""
    folder.mkdir(parents=True, exist_ok=True)
    series_uid, frame_uid = generate_uid(), generate_uid()
    out = []
    for k in range(volume.shape[0]):
        uid = generate_uid()
        ds = Dataset()
        ds.file_meta = _meta(CT_STORAGE, uid)
        ds.SOPClassUID, ds.SOPInstanceUID = CT_STORAGE, uid
        _patient_study(ds, patient, study_uid, date)
        ds.Modality = "CT"
        ds.SeriesInstanceUID, ds.FrameOfReferenceUID = series_uid, frame_uid
        ds.SeriesNumber, ds.InstanceNumber = 1, k + 1
        ds.SeriesDescription = description
        ds.Manufacturer = "synthetic"
        ds.PositionReferenceIndicator = ""
        ds.ImageOrientationPatient = [1, 0, 0, 0, 1, 0]
        ds.ImagePositionPatient = [origin[0], origin[1], origin[2] + k * spacing[2]]
        ds.PixelSpacing = [spacing[1], spacing[0]]
        ds.SliceThickness = spacing[2]
        ds.Rows, ds.Columns = volume.shape[1], volume.shape[2]
        ds.SamplesPerPixel = 1
        ds.PhotometricInterpretation = "MONOCHROME2"
        ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 16, 15, 1
        ds.RescaleIntercept, ds.RescaleSlope = 0, 1
        ds.ImageType = ["ORIGINAL", "PRIMARY", "AXIAL"]
        ds.PixelData = np.ascontiguousarray(volume[k], dtype=np.int16).tobytes()
        ds.save_as(folder / f"{k:03d}.dcm", enforce_file_format=True)
        out.append(ds)
    return out


def write_seg(path: Path, sources: list[Dataset], masks: dict[str, np.ndarray]) -> Dataset:
    """A BINARY DICOM-SEG (highdicom) with one segment per mask (k, j, i), empty frames omitted."""
    import highdicom as hd
    from pydicom.sr.codedict import codes

    names = list(masks)
    pixel = np.stack([masks[n] for n in names], axis=-1).astype(np.uint8)
    descriptions = [
        hd.seg.SegmentDescription(
            segment_number=i,
            segment_label=name,
            segmented_property_category=codes.SCT.Tissue,
            segmented_property_type=codes.SCT.Organ,
            algorithm_type=hd.seg.SegmentAlgorithmTypeValues.MANUAL,
        )
        for i, name in enumerate(names, 1)
    ]
    seg = hd.seg.Segmentation(
        source_images=sources,
        pixel_array=pixel,
        segmentation_type=hd.seg.SegmentationTypeValues.BINARY,
        segment_descriptions=descriptions,
        series_instance_uid=generate_uid(),
        series_number=2,
        sop_instance_uid=generate_uid(),
        instance_number=1,
        manufacturer="synthetic",
        manufacturer_model_name="tests",
        software_versions="1",
        device_serial_number="1",
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    seg.save_as(path)
    return seg


def write_rtstruct(
    path: Path, sources: list[Dataset], boxes: dict[str, list[tuple[int, int, int, int, int]]]
) -> Dataset:
    """RTSTRUCT with rectangular contours ``(k, j0, j1, i0, i1)`` (inclusive voxel ranges)."""
    first = sources[0]
    uid = generate_uid()
    ds = Dataset()
    ds.file_meta = _meta(RTSTRUCT_STORAGE, uid)
    ds.SOPClassUID, ds.SOPInstanceUID = RTSTRUCT_STORAGE, uid
    _patient_study(ds, first.PatientID, first.StudyInstanceUID, first.StudyDate)
    ds.Modality = "RTSTRUCT"
    ds.SeriesInstanceUID = generate_uid()
    ds.SeriesNumber = 3
    ds.StructureSetLabel = "test"
    series = Dataset()
    series.SeriesInstanceUID = first.SeriesInstanceUID
    study = Dataset()
    study.ReferencedSOPInstanceUID = first.StudyInstanceUID
    study.RTReferencedSeriesSequence = Sequence([series])
    frame = Dataset()
    frame.FrameOfReferenceUID = first.FrameOfReferenceUID
    frame.RTReferencedStudySequence = Sequence([study])
    ds.ReferencedFrameOfReferenceSequence = Sequence([frame])
    rois, contours = [], []
    sx, sy = float(first.PixelSpacing[1]), float(first.PixelSpacing[0])
    ox, oy, oz = (float(v) for v in first.ImagePositionPatient)
    sz = float(first.SliceThickness)
    for number, (name, rects) in enumerate(boxes.items(), start=1):
        roi = Dataset()
        roi.ROINumber, roi.ROIName = number, name
        roi.ReferencedFrameOfReferenceUID = first.FrameOfReferenceUID
        rois.append(roi)
        items = []
        for k, j0, j1, i0, i1 in rects:
            z = oz + k * sz
            corners = [
                (i0 - 0.4, j0 - 0.4),
                (i1 + 0.4, j0 - 0.4),
                (i1 + 0.4, j1 + 0.4),
                (i0 - 0.4, j1 + 0.4),
            ]
            contour = Dataset()
            contour.ContourGeometricType = "CLOSED_PLANAR"
            contour.NumberOfContourPoints = 4
            contour.ContourData = [v for i, j in corners for v in (ox + i * sx, oy + j * sy, z)]
            items.append(contour)
        roi_contour = Dataset()
        roi_contour.ReferencedROINumber = number
        roi_contour.ContourSequence = Sequence(items)
        contours.append(roi_contour)
    ds.StructureSetROISequence = Sequence(rois)
    ds.ROIContourSequence = Sequence(contours)
    path.parent.mkdir(parents=True, exist_ok=True)
    ds.save_as(path, enforce_file_format=True)
    return ds
