import AVFoundation
import Foundation

/// Camera -> core -> published overlay. AVFoundation delivers upright 32BGRA frames to one
/// serial queue, where the bridge (opened on that queue before the first frame) runs the
/// model on the pixel buffer in place; results and per-stage timings go to the main thread.
/// A refused asset set is published as `refusal` and nothing runs.
final class CameraModel: NSObject, ObservableObject, AVCaptureVideoDataOutputSampleBufferDelegate {
    @Published var overlay = Overlay.empty
    @Published var status = "Verifying the asset set…"
    @Published var timings = ""
    @Published var refusal: String?

    let session = AVCaptureSession()
    private let queue = DispatchQueue(label: "edgekit.frames")
    private var bridge: EdgekitBridge?  // used on `queue` only
    private var modes: [Mode] = []
    private var modeIndex = 0

    enum Mode {
        case single(model: String, task: String)
        case ocr

        var title: String {
            switch self {
            case let .single(model, task): return "\(model) (\(task))"
            case .ocr: return "OCR system (det → cls → rec)"
            }
        }
    }

    func start() {
        queue.async { self.openAssets() }
        AVCaptureDevice.requestAccess(for: .video) { granted in
            guard granted else {
                DispatchQueue.main.async { self.status = "Camera permission denied: the demo needs the camera." }
                return
            }
            self.queue.async { self.configureSession() }
        }
    }

    /// Cycles through the OCR system and the set's models.
    func nextMode() {
        queue.async {
            guard !self.modes.isEmpty else { return }
            self.modeIndex = (self.modeIndex + 1) % self.modes.count
        }
    }

    private func openAssets() {
        guard let folder = Bundle.main.url(forResource: "edgekit", withExtension: nil) else {
            publishRefusal("The app bundle has no edgekit/ asset folder: run `./run edgekit package --platform ios BUNDLE...` and rebuild.")
            return
        }
        do {
            let opened = try EdgekitBridge(folder: folder.path, options: #"{"threads": 2, "power_mode": "high"}"#)
            let described = try opened.describe()
            guard let doc = (try? JSONSerialization.jsonObject(with: Data(described.utf8))) as? [String: Any] else { return }
            let models = (doc["models"] as? [[String: Any]] ?? []).map {
                ($0["name"] as? String ?? "", $0["task"] as? String ?? "")
            }
            let hasOcr = models.contains { $0.1 == "ocr_det" } && models.contains { $0.1 == "ocr_rec" }
            modes = (hasOcr ? [Mode.ocr] : []) + models.map { Mode.single(model: $0.0, task: $0.1) }
            bridge = opened
            let files = doc["files"] as? Int ?? 0
            let verifyMs = doc["verify_ms"] as? Double ?? 0
            let line = String(format: "verified %d files in %.1f ms · %@ (tap to switch)", files, verifyMs,
                              modes.first?.title ?? "no model")
            DispatchQueue.main.async { self.status = line }
        } catch {
            let ns = error as NSError
            let refused = ns.domain == EKErrorDomain
                && (ns.code == EKStatus.assets.rawValue || ns.code == EKStatus.version.rawValue)
            publishRefusal((refused ? "Asset set refused: " : "Cannot open the assets: ") + ns.localizedDescription)
        }
    }

    private func publishRefusal(_ message: String) {
        DispatchQueue.main.async {
            self.refusal = message
            self.status = ""
        }
    }

    private func configureSession() {
        session.beginConfiguration()
        session.sessionPreset = .vga640x480
        guard let camera = AVCaptureDevice.default(.builtInWideAngleCamera, for: .video, position: .back),
              let input = try? AVCaptureDeviceInput(device: camera), session.canAddInput(input) else {
            session.commitConfiguration()
            DispatchQueue.main.async { self.status = "No back camera available." }
            return
        }
        session.addInput(input)
        let output = AVCaptureVideoDataOutput()
        output.videoSettings = [kCVPixelBufferPixelFormatTypeKey as String: kCVPixelFormatType_32BGRA]
        output.alwaysDiscardsLateVideoFrames = true
        output.setSampleBufferDelegate(self, queue: queue)
        if session.canAddOutput(output) { session.addOutput(output) }
        if let connection = output.connection(with: .video) {  // upright pixels, as the model was trained
            if #available(iOS 17.0, *) {
                if connection.isVideoRotationAngleSupported(90) { connection.videoRotationAngle = 90 }
            } else if connection.isVideoOrientationSupported {
                connection.videoOrientation = .portrait
            }
        }
        session.commitConfiguration()
        session.startRunning()
    }

    func captureOutput(_ output: AVCaptureOutput, didOutput sampleBuffer: CMSampleBuffer,
                       from connection: AVCaptureConnection) {
        guard let bridge, !modes.isEmpty, let pixels = CMSampleBufferGetImageBuffer(sampleBuffer) else { return }
        let mode = modes[modeIndex]
        let size = CGSize(width: CVPixelBufferGetWidth(pixels), height: CVPixelBufferGetHeight(pixels))
        do {
            let json: String
            switch mode {
            case let .single(model, _): json = try bridge.runModel(model, pixelBuffer: pixels)
            case .ocr: json = try bridge.ocrPixelBuffer(pixels, det: nil, rec: nil, cls: nil)
            }
            let t = try bridge.lastTimings()
            let overlay = Overlay(json: json, imageSize: size) ?? .empty
            var line = String(format: "pre %.1f ms · inference %.1f ms · post %.1f ms", t.preprocessMs,
                              t.inferenceMs, t.postprocessMs)
            if t.otherMs > 0 { line += String(format: " · crops %.1f ms", t.otherMs) }
            line += String(format: " · total %.1f ms", t.totalMs)
            let text = "\(mode.title)  \(Int(size.width))x\(Int(size.height))\n\(line)"
            DispatchQueue.main.async {
                self.overlay = overlay
                self.timings = text
            }
        } catch {
            let message = error.localizedDescription
            DispatchQueue.main.async {
                self.overlay = .empty
                self.timings = message
            }
        }
    }
}
