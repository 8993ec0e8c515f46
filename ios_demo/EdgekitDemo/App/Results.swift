import CoreGraphics
import Foundation

/// A box in image pixels and the text drawn above it.
struct OverlayBox: Identifiable {
    let id: Int
    let rect: CGRect
    let text: String
}

/// What the overlay draws, read from the core's JSON (edgekit_c.h: ek_run / ek_ocr results).
struct Overlay {
    var imageSize: CGSize
    var headline: String?
    var boxes: [OverlayBox]

    static let empty = Overlay(imageSize: .zero, headline: nil, boxes: [])

    /// ek_run's {"model", "task", "result", ...} or ek_ocr's {"lines", ...}.
    init?(json: String, imageSize: CGSize) {
        guard let data = json.data(using: .utf8),
              let doc = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else { return nil }
        self.imageSize = imageSize
        if let lines = doc["lines"] as? [[String: Any]] {
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
            // the per-pixel mask is in "rle"; the overlay shows the class shares (no mask drawing here yet)
            let classes = (doc["result"] as? [String: Any])?["classes"] as? [String: Double] ?? [:]
            headline = classes.keys.sorted().map { String(format: "%@ %.1f%%", $0, classes[$0] ?? 0) }.joined(separator: "  ")
        case "ocr_rec":
            headline = (doc["result"] as? [String: Any])?["text"] as? String
        case "ocr_cls":
            headline = "angle \((doc["result"] as? [String: Any])?["label"] as? String ?? "?")"
        default:
            headline = "\(doc["result"] ?? "")"
        }
    }

    private init(imageSize: CGSize, headline: String?, boxes: [OverlayBox]) {
        self.imageSize = imageSize
        self.headline = headline
        self.boxes = boxes
    }

    private static func boxes(_ items: [[String: Any]], text: ([String: Any]) -> String) -> [OverlayBox] {
        items.enumerated().compactMap { index, item in
            guard let b = item["box"] as? [Double], b.count == 4 else { return nil }
            return OverlayBox(id: index, rect: CGRect(x: b[0], y: b[1], width: b[2] - b[0], height: b[3] - b[1]),
                              text: text(item))
        }
    }
}
