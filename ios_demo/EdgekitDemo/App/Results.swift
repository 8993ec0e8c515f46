import CoreGraphics
import Foundation

/// A box in image pixels and the text drawn above it; `quad` (4 corners, clockwise from top-left, in image
/// pixels) when the core gave one (OCR: the text region as detected, rotated), drawn instead of the box.
struct OverlayBox: Identifiable {
    let id: Int
    let rect: CGRect
    let text: String
    var quad: [CGPoint]? = nil
}

/// A segmentation mask: the class of every pixel, decoded from the core's run-length "rle", as the
/// translucent colour layer OverlayView draws (built here, on the capture queue, not in the view).
struct OverlayMask {
    let width: Int
    let height: Int
    let image: CGImage

    /// The core's {"size": [h, w], "rle": [[class, run], ...]} (native/app/src/vision_task.cc's mask_json,
    /// edgekit/tasks/segmentation.py's encode_rle: runs in row-major order); nil when malformed.
    init?(result: [String: Any]) {
        guard let size = result["size"] as? [Int], size.count == 2,
              let rle = result["rle"] as? [[Int]] else { return nil }
        let height = size[0], width = size[1]
        guard height > 0, width > 0,
              let classes = OverlayMask.decode(rle, count: height * width),
              let image = OverlayMask.colourLayer(classes, width: width, height: height) else { return nil }
        self.width = width
        self.height = height
        self.image = image
    }

    /// As segmentation.py's decode_rle: each [class, run] repeated; nil unless the runs fill `count` pixels exactly.
    static func decode(_ rle: [[Int]], count: Int) -> [UInt8]? {
        var classes = [UInt8]()
        classes.reserveCapacity(count)
        for run in rle {
            guard run.count == 2, (0...255).contains(run[0]), run[1] >= 0, classes.count + run[1] <= count else { return nil }
            classes.append(contentsOf: repeatElement(UInt8(run[0]), count: run[1]))
        }
        return classes.count == count ? classes : nil
    }
}

/// What the overlay draws, read from the core's JSON (edgekit_c.h: ek_run / ek_ocr results).
struct Overlay {
    var imageSize: CGSize
    var headline: String?
    var boxes: [OverlayBox]
    var mask: OverlayMask?

    static let empty = Overlay(imageSize: .zero, headline: nil, boxes: [], mask: nil)

    /// ek_run's {"model", "task", "result", ...} or ek_ocr's {"lines", ...}.
    init?(json: String, imageSize: CGSize) {
        guard let data = json.data(using: .utf8),
              let doc = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else { return nil }
        self.imageSize = imageSize
        mask = nil
        if let lines = doc["lines"] as? [[String: Any]] {
            // already in PaddleOCR's reading order: the core sorts the lines (native/app/src/ocr.cc, sort_boxes)
            headline = nil
            boxes = Overlay.boxes(lines, text: { $0["text"] as? String ?? "" })
            return
        }
        boxes = []
        switch doc["task"] as? String {
        case "classification":
            let r = doc["result"] as? [String: Any] ?? [:]
            let label = r["label"] as? String ?? "\(r["class"] ?? "?")"
            headline = String(format: "%@  %.3f", label, r["score"] as? Double ?? 0)
        case "ocr_det":
            headline = nil
            boxes = Overlay.boxes(doc["result"] as? [[String: Any]] ?? [],
                                  text: { String(format: "%.2f", $0["score"] as? Double ?? 0) })
        case "detection":
            // every detection above task.json's score threshold comes back; draw the confident ones
            headline = nil
            boxes = Overlay.boxes((doc["result"] as? [[String: Any]] ?? []).filter { ($0["score"] as? Double ?? 0) >= 0.5 },
                                  text: { String(format: "%@ %.2f", $0["label"] as? String ?? "?", $0["score"] as? Double ?? 0) })
        case "segmentation":
            // the class shares as the headline, the per-pixel mask ("rle", in image pixels) as a colour layer
            let result = doc["result"] as? [String: Any] ?? [:]
            let classes = result["classes"] as? [String: Double] ?? [:]
            headline = classes.keys.sorted().map { String(format: "%@ %.1f%%", $0, classes[$0] ?? 0) }.joined(separator: "  ")
            mask = OverlayMask(result: result)
        case "ocr_rec":
            headline = (doc["result"] as? [String: Any])?["text"] as? String
        case "ocr_cls":
            headline = "angle \((doc["result"] as? [String: Any])?["label"] as? String ?? "?")"
        default:
            headline = "\(doc["result"] ?? "")"
        }
    }

    private init(imageSize: CGSize, headline: String?, boxes: [OverlayBox], mask: OverlayMask?) {
        self.imageSize = imageSize
        self.headline = headline
        self.boxes = boxes
        self.mask = mask
    }

    private static func boxes(_ items: [[String: Any]], text: ([String: Any]) -> String) -> [OverlayBox] {
        items.enumerated().compactMap { index, item in
            guard let b = item["box"] as? [Double], b.count == 4 else { return nil }
            return OverlayBox(id: index, rect: CGRect(x: b[0], y: b[1], width: b[2] - b[0], height: b[3] - b[1]),
                              text: text(item), quad: quad(item["quad"]))
        }
    }

    /// "quad": [[x, y] x 4] in image pixels; nil when absent or not 4 points.
    private static func quad(_ value: Any?) -> [CGPoint]? {
        guard let corners = value as? [[Double]], corners.count == 4, corners.allSatisfy({ $0.count == 2 }) else { return nil }
        return corners.map { CGPoint(x: $0[0], y: $0[1]) }
    }
}
